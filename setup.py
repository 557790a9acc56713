"""The package list, found rather than listed (pyproject.toml holds everything else).

align's import package is spread over four folders: align/ is `align`, cli/ is `align.cli`,
store/ is `align.store` and notebooks/ is `align.notebooks` (the notebooks as package data, so
an installed wheel holds them). setuptools' `find` cannot map a folder under another package's
name, so the packages are found here, folder by folder, and every subpackage of each is in the
wheel and the sdist without being named.
"""

from setuptools import find_packages, setup

FOLDERS = {
    "align": "align",
    "align.cli": "cli",
    "align.store": "store",
    "align.notebooks": "notebooks",
}

setup(
    package_dir=FOLDERS,
    packages=[
        package
        for name, folder in FOLDERS.items()
        for package in (name, *(f"{name}.{sub}" for sub in find_packages(folder)))
    ],
    package_data={"align.notebooks": ["*.ipynb"]},
)
