"""Ask a running `sudoku-batch serve` (port in argv) for its page and one puzzle; print what came back."""

import json
import sys
import urllib.request
from pathlib import Path

base = f"http://127.0.0.1:{sys.argv[1]}"
page = urllib.request.urlopen(f"{base}/", timeout=5).read().decode()
body = json.dumps({"puzzle": Path("client/samples/sample.txt").read_text().splitlines()[0]}).encode()
request = urllib.request.Request(f"{base}/api/solve", data=body, method="POST")
record = json.loads(urllib.request.urlopen(request, timeout=60).read())
print(("page" if 'id="grid"' in page else "no page") + ", " + record["status"])
