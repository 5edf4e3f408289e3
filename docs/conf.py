# Sphinx configuration of the libffpa documentation.
#
# The build (docs/meson.build) stages the pages next to the generated knob table in the build
# directory and passes the Doxygen XML location on the command line:
#   sphinx-build -c <source>/docs -D breathe_projects.ffpa=<build>/docs/doxygen/xml ...

project = "libffpa"
author = "The libffpa authors"
copyright = "libffpa authors; Apache-2.0"
# -D version=... and -D release=... come from the Meson project version.

extensions = ["breathe"]

# The staged source directory also holds the build outputs (HTML, Doxygen XML): read only the
# pages themselves. knobs_table.rst is a fragment included by knobs.rst, not a page.
include_patterns = ["*.rst"]
exclude_patterns = ["knobs_table.rst", "install-steps.rst"]

root_doc = "index"
language = "en"
highlight_language = "c"
primary_domain = "c"

breathe_projects = {}
breathe_default_project = "ffpa"
# The header is C: render it with Sphinx's C domain, not the C++ one.
breathe_domain_by_extension = {"h": "c"}
breathe_default_members = ("members",)
breathe_show_include = False

html_theme = "alabaster"
html_theme_options = {"page_width": "1200px", "sidebar_width": "240px"}
html_show_sourcelink = False
