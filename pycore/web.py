"""The page's one entry point: a query string in, a JSON string out. No DOM here.

Bad values never stop the estimate: each one is reported under its key and replaced by its default,
and every other input is kept.
"""

import json
from urllib.parse import parse_qsl

from . import report
from .explain import formulas
from .schema import BY_KEY, DEFAULTS, InputError, parse, to_query
from .estimate import estimate_values


def _pairs(query):
    """Key -> last value of a query string, and messages for repeated or unknown keys."""
    raw, errors = {}, {}
    for key, value in parse_qsl(query.lstrip("?"), keep_blank_values=True):
        if key not in BY_KEY:
            errors[key[:40]] = f"{key[:40]}: unknown key, ignored"
            continue
        if key in raw:
            errors[key] = f"{key}: given more than once; the last value is used"
        raw[key] = value
    return raw, errors


def run(query):
    """Estimate for a URL query string; returns JSON with result, csv, formulas, errors and query."""
    raw, errors = _pairs(query)
    raw = {k: v for k, v in raw.items() if v != ""}
    values, parse_errors = parse(raw, strict=False)
    errors.update(parse_errors)
    result = None
    for _ in range(len(BY_KEY)):
        try:
            result = estimate_values(values)
            break
        except InputError as error:
            key = error.key if error.key in BY_KEY else "model"
            errors[key] = str(error)
            if values[key] == DEFAULTS[key]:       # the default itself fails: nothing left to try
                break
            values[key] = DEFAULTS[key]
    payload = {"errors": errors, "query": to_query(values)}
    if result is not None:
        payload.update(result=result, breakdown=report.breakdown(result), csv=report.to_csv(values, result),
                       formulas=formulas(values, result))
    return json.dumps(payload)
