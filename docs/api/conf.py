"""Sphinx configuration of nsqctl's API reference: the public names at ``nsqctl.X``.

Built by ``python -m sphinx -W --keep-going -b html docs/api OUT`` (CI fails on any
warning). Sphinx autodoc rather than pdoc because nsqctl's docstrings are reStructuredText
with Sphinx roles (:class:, :mod:, :meth:), which Sphinx renders as links and pdoc shows
as literal text; and ``-W`` makes every docstring markup error fail the build.
"""

from __future__ import annotations

import nsqctl

project = "nsqctl"
release = version = nsqctl.__version__
extensions = ["sphinx.ext.autodoc"]

# Only what index.rst names; nothing from the repository's other Markdown files.
root_doc = "index"
exclude_patterns = ["_build"]

# Members in source order (the order the modules read in), type hints in the signature.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
# The reference describes nsqctl.X, the only promised spelling: not the module a name
# happens to live in.
add_module_names = True
html_theme = "alabaster"
html_show_sourcelink = False
