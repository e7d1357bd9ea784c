"""Packaging facts pyproject.toml cannot state: the package list is found, not written by hand.

Every package folder under debugger/ is found (a new format folder needs no edit here), and the folder
web/ is installed as the package ``tdbg_web`` (pyproject.toml's package-dir), which a find cannot name.
"""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["debugger", "debugger.*"]) + ["tdbg_web"])
