"""Sphinx configuration of nsqctl's API reference: the public names at ``nsqctl.X``.

Built by ``python -m sphinx -W --keep-going -E -b html docs/api OUT`` (CI fails on any
warning). Sphinx autodoc rather than pdoc because nsqctl's docstrings are reStructuredText
with Sphinx roles (:class:, :mod:, :meth:), which Sphinx renders as links and pdoc shows
as literal text; and ``-W`` makes every docstring markup error fail the build.

Not nitpicky (``-n``): signatures name standard-library types, which resolve only through
intersphinx, and that downloads Python's inventory at build time.
"""

from __future__ import annotations

import nsqctl

project = "nsqctl"
release = version = nsqctl.__version__
extensions = ["sphinx.ext.autodoc"]
root_doc = "index"

# ``automodule:: nsqctl`` documents the names of nsqctl.__all__ (loaded through the
# package's lazy __getattr__), each as nsqctl.X, in __all__'s order; public methods
# without a docstring are listed too, with their signature.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
html_theme = "alabaster"
html_show_sourcelink = False
