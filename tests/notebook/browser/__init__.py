"""Helpers for end-to-end tests that drive JupyterLab in Debian's chromium with Playwright.

``lab``: a JupyterLab server with isolated Jupyter dirs, a token and REST helpers.
``page``: a chromium launched with the flags that work on CI machines, notebooks written
with kernelspec metadata, opened at unique workspace URLs, run-all and wait helpers.
"""
