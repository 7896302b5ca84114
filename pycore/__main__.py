import sys

from pycore.output.cli import main

sys.exit(main())
