"""Prints where, relative to install prefix argv[1], this interpreter finds packages without
PYTHONPATH: its site-packages (Debian: dist-packages) directory under that prefix, e.g.
lib/python3.11/dist-packages for /usr/local with Debian's python3. For a prefix the interpreter
does not search, prints the standard layout's lib/pythonX.Y/site-packages (then PYTHONPATH must
name it). Run by python/CMakeLists.txt at configure time; nothing is imported but the standard
library.
"""

import os
import site
import sys
import sysconfig


def main() -> int:
    prefix = os.path.normpath(sys.argv[1])
    for directory in site.getsitepackages():  # every one, existing or not (sys.path lists existing ones)
        relative = os.path.relpath(directory, prefix)
        if relative.startswith("lib"):  # under the prefix itself, not under prefix/local
            print(relative)
            return 0
    standard = sysconfig.get_path("purelib", "posix_prefix", {"base": prefix, "platbase": prefix})
    print(os.path.relpath(standard, prefix))
    return 0


if __name__ == "__main__":
    sys.exit(main())
