"""`python -m awb` is `awb`."""

from awb.cli.main import main

main()
