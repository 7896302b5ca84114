"""Stage 2, the model: the architecture record and its parameter count, the preset and GPU catalogs, and
the readers of Hugging Face config.json files. Imports pycore.base and pycore.inputs."""
