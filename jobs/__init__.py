# Cronboard's version: each scheduler node records it in its lease (the
# cluster page's Version column), so a node left on an older one shows.
__version__ = "1.0.0"
