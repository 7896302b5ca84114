"""Input errors as data: the key that caused it and a message for people. Leaves import this, nothing else."""


class FieldError(ValueError):
    """A bad value for one input key; ``str()`` is the one-line message users see ("key: message")."""

    def __init__(self, key: str, message: str, fallback: object = None) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message
        self.fallback = fallback    # the value to estimate with instead, when the default would fail too

    def under(self, prefix: str) -> "FieldError":
        """The same error reported under ``prefix + key`` (a baseline's ``base.KEY``)."""
        return FieldError(prefix + self.key, self.message, self.fallback)


InputError = FieldError     # the name the first version used
