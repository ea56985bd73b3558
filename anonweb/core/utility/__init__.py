"""utility: what a release kept of its source (internal: computed from the source)"""
