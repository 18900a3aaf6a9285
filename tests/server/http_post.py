"""http_post.py URL ROUTE BODY-JSON OUT: POST the JSON body to URL+ROUTE and write the reply to
OUT as {"status": HTTP status, "body": the reply's JSON}, 4xx and 5xx included (the shell tests
of the server: test-server.sh, test-server-cache.sh)."""
import json
import sys
import urllib.error
import urllib.request

url, route, body, out = sys.argv[1:5]
req = urllib.request.Request(url + route, body.encode())
try:
    r = urllib.request.urlopen(req, timeout=300)
    code, data = r.status, r.read()
except urllib.error.HTTPError as e:
    code, data = e.code, e.read()
with open(out, "w") as f:
    f.write(json.dumps({"status": code, "body": json.loads(data)}))
