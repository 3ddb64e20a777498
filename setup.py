"""Build of the optional C speed-up of the indexing tokenizer (`pi_memory.core._cut`).

Everything else is in pyproject.toml. The extension is optional: without a C compiler the
install goes on and `pi_memory.core.text.index_texts` uses its pure-Python path, which gives
the same tokens (tests/test_text_native.py), only slower.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("pi_memory.core._cut", ["src/pi_memory/core/_cut.c"], optional=True)])
