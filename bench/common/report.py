"""What every benchmark prints last: the checks of what it measured (a number that does not measure
what it says is worse than none), and exit status 1 when one failed."""

import sys


def exit_on_problems(problems: list[str], what: str = "") -> None:
    if problems:
        print(f"\nUNEXPECTED {what}RESULTS (the numbers above do not measure what they should):")
        for p in problems:
            print(f"  - {p}")
        sys.exit(1)
