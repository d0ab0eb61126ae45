"""Parses a Prometheus text-format page (stdin) with the official Python client's parser.

Prints one JSON object: `families` (each metric family's name and type) and `samples` (every
sample as `[name, labels, value]`), or `error` (and exits 1) when the parser rejects the page.
"""

from __future__ import annotations

import json
import sys

from prometheus_client.parser import text_string_to_metric_families


def main() -> int:
    page = sys.stdin.read()
    try:
        families = list(text_string_to_metric_families(page))
    except Exception as error:  # the parser raises ValueError and others on a bad page
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
        return 1
    print(
        json.dumps(
            {
                "families": [{"name": f.name, "type": f.type} for f in families],
                "samples": [[s.name, s.labels, s.value] for f in families for s in f.samples],
            }
        )
    )
    return 0


sys.exit(main())
