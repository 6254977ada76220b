import sys

from pteforge.cli import main

sys.exit(main())
