#!/usr/bin/env bats
# The master's dashboard (GET / of the admin port): its files' types and Content-Security-Policy, a page that
# loads nothing from outside the admin port, and the page run by headless Chromium against a real master with
# three real peers (peers, the ring in ring order, the rates and their charts in the rendered DOM), with a
# stopped peer (marked silent; the operation it holds up, with its age), and with a v1/status that fails (the
# master shown as unreachable).
# Helpers (master, peers, http) in admin_helpers.bash.

load admin_helpers

# get PATH [METHOD]: the response to METHOD (default GET) of the admin port's PATH, as "CODE" then
# "Header: value" lines in $TMP/head, and the body in $TMP/body
get() {
    python3 - "http://127.0.0.1:$APORT$1" "${2:-GET}" "$TMP" <<'PY'
import sys, urllib.request, urllib.error
url, method, tmp = sys.argv[1:4]
try:
    r = urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=5)
except urllib.error.HTTPError as e:
    r = e
body = r.read()
with open(tmp + "/head", "w") as f:
    f.write("%d\n" % r.status + "".join("%s: %s\n" % kv for kv in r.headers.items()))
open(tmp + "/body", "wb").write(body)
PY
}

# dump_dom: the page as headless Chromium has drawn it, into $TMP/dom.html. Every host but loopback goes through a
# proxy that does not exist, so the page must work without network; virtual time runs the page's polls (one a
# second) for 5 s of page time, which takes a second or two. Fails if the page wrote to the console: an uncaught
# exception, or a load the Content-Security-Policy refused.
dump_dom() {
    timeout 90 chromium --headless=new --no-sandbox --disable-gpu --user-data-dir="$TMP/chromium" \
        --proxy-server=http://127.0.0.1:9 --enable-logging=stderr --v=0 --virtual-time-budget=5000 \
        --dump-dom "http://127.0.0.1:$APORT/" > "$TMP/dom.html" 2> "$TMP/chromium.err"
    if grep ':CONSOLE' "$TMP/chromium.err"; then return 1; fi
}

@test "dashboard: GET / is HTML, its script and style have their types, and every file allows only 'self'" {
    start_master
    csp="Content-Security-Policy: default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    for f in /:text/html /index.html:text/html /dashboard.js:text/javascript /dashboard.css:text/css; do
        get "${f%%:*}"
        [ "$(head -1 "$TMP/head")" = 200 ]
        grep -qx "Content-Type: ${f#*:}; charset=utf-8" "$TMP/head"
        grep -qxF "$csp" "$TMP/head"
        grep -qx 'X-Content-Type-Options: nosniff' "$TMP/head"
        [ -s "$TMP/body" ]
    done
    get /
    grep -q '<svg id="chart-bytes"' "$TMP/body"
    get / HEAD
    [ "$(head -1 "$TMP/head")" = 200 ]
    [ ! -s "$TMP/body" ]
    get / POST
    [ "$(head -1 "$TMP/head")" = 405 ]
    grep -qx 'Allow: GET, HEAD' "$TMP/head"
    get /nothing.js
    [ "$(head -1 "$TMP/head")" = 404 ]
}

@test "dashboard: the page names no URL outside the admin port, and every file it loads is served" {
    start_master
    get /
    cp "$TMP/body" "$TMP/index.html"
    # Every src and href is a path relative to the admin port: no scheme, no other host.
    refs=$(grep -o '\(src\|href\)="[^"]*"' "$TMP/index.html" | sed 's/^[a-z]*="\(.*\)"$/\1/')
    [ -n "$refs" ]
    for ref in $refs; do
        [[ "$ref" != *:* && "$ref" != //* && "$ref" != /* ]]
        if [ "$ref" != v1/status ]; then
            get "/$ref"
            [ "$(head -1 "$TMP/head")" = 200 ]
            cp "$TMP/body" "$TMP/${ref##*/}"
        fi
    done
    [ -s "$TMP/dashboard.js" ] && [ -s "$TMP/dashboard.css" ]
    # No URL anywhere in the files (the SVG namespace is a name, never fetched), nor a CSS import or url() of
    # anything but a fragment of the page itself.
    run grep -hoE 'https?://[^"'"'"' )]*|@import|url\([^#][^)]*\)' \
        "$TMP/index.html" "$TMP/dashboard.js" "$TMP/dashboard.css"
    [ "$(grep -vx 'http://www.w3.org/2000/svg' <<< "$output" | grep -c .)" -eq 0 ]
    # The script asks for nothing but v1/status.
    [ "$(grep -o 'fetch([^)]*' "$TMP/dashboard.js")" = "fetch('v1/status', {cache: 'no-store', signal: ctl.signal}" ]
}

@test "dashboard in headless Chromium: the live peers, their ring in ring order, the rates and their charts" {
    command -v chromium > /dev/null || skip "chromium not installed (scripts/deps.sh installs it)"
    start_master
    start_peer; start_peer; start_peer
    wait_accepted 3
    # The master's rates span 1 to 4 s of samples: the page shows them once the master has them.
    for _ in $(seq 1 50); do
        http GET /v1/status > "$TMP/status"
        grep -q '"revisions_per_s":[0-9]' "$TMP/status" && break
        sleep 0.1
    done
    sed -i 's/^200 //' "$TMP/status"
    dump_dom
    python3 - "$TMP/status" "$TMP/dom.html" <<'PY'
import json, re, sys
status = json.load(open(sys.argv[1]))
dom = open(sys.argv[2]).read()
ring = status["groups"][0]["ring"]
assert len(ring) == 3 and len(status["peers"]) == 3, status
# One circle a peer, in ring order, each labelled with its uuid prefix.
drawn = re.findall(r'<circle class="ring-peer[^"]*" data-uuid="([0-9a-f]{32})"', dom)
assert drawn == ring, (drawn, ring)
for u in ring:
    assert re.search(r'<text class="label"[^>]*>%s</text>' % u[:8], dom), u
    assert re.search(r'<code title="%s">%s</code>' % (u, u[:8]), dom), u
assert "3 peers (3 accepted)" in dom, dom
rate = re.search(r'id="rate-0">([0-9.]+) rev/s, ([0-9.]+) [kMGT]?B/s reduced<', dom)
assert rate and float(rate.group(1)) > 0 and float(rate.group(2)) > 0, dom
# Both charts have group 0's line with several of the page's samples.
series = re.findall(r'<path class="series" data-group="0" d="([^"]*)"', dom)
assert len(series) == 2 and all(d.count(" L") >= 2 for d in series), series
assert "unreachable" not in dom, dom
# The group's completed collectives by kind, and the counters by kind: the synthetic workload all-reduces only.
done = re.search(r'<dd class="completed">([0-9]+) collectives \(all_reduce ([0-9]+)\), ', dom)
assert done and int(done.group(2)) > 0, dom
kinds = re.findall(r'<dt>(all_reduce|broadcast|all_gather|all_gather_v|reduce_scatter|barrier)</dt>'
                   r'<dd>([0-9]+) completed, [0-9]+ aborted, [0-9]+ rejected, [0-9.]+ [kMGT]?B</dd>', dom)
assert [k for k, _ in kinds] == ["all_reduce"] and int(kinds[0][1]) > 0, kinds
PY
}

@test "dashboard in headless Chromium: a stopped peer is marked silent, the operation it holds up has its age" {
    command -v chromium > /dev/null || skip "chromium not installed (scripts/deps.sh installs it)"
    start_master
    start_peer; A=$LAST; start_peer
    wait_accepted 2
    kill -STOP "$A"
    sleep 3.5
    http GET /v1/status | sed 's/^200 //' > "$TMP/status"
    dump_dom
    kill -CONT "$A"
    python3 - "$TMP/status" "$TMP/dom.html" <<'PY'
import json, re, sys
status = json.load(open(sys.argv[1]))
dom = open(sys.argv[2]).read()
ops = status["run_operations"] + [o for g in status["groups"] for o in g["operations"]]
assert ops and max(o["age_ms"] for o in ops) >= 1000, status
table = re.search(r'<table id="operations">.*?</table>', dom, re.S).group(0)
rows = [re.findall(r"<td>(.*?)</td>", r) for r in re.findall(r'<tr class="op[^"]*">(.*?)</tr>', table)]
assert rows, table
# Oldest first: its kind is one the master had in flight, its age in seconds at least the 2 s the peer stopped.
group, kind, collective, tag, state, op_seq, members, age = rows[0]
assert kind in {o["kind"] for o in ops} and state in ("voting", "running"), rows
assert re.fullmatch(r"[0-9.]+s", age) and float(age[:-1]) >= 3, rows
# The stopped peer, silent past 3 s, is marked in the ring; the other is not.
silent = max(status["peers"], key=lambda p: p["last_heartbeat_ms_ago"])["uuid"]
circles = dict((u, c) for c, u in re.findall(r'<circle class="ring-peer ([^"]*)" data-uuid="([0-9a-f]{32})"', dom))
assert len(circles) == 2 and all(("late" in c.split()) == (u == silent) for u, c in circles.items()), circles
assert any(o["kind"] == kind and (o["collective_kind"] or "") == collective and
           members == "%d: %s" % (o["members"], " ".join(u[:8] for u in o["member_uuids"])) for o in ops), (rows, ops)
# A collective shows its kind (the synthetic workload all-reduces); the other operations none.
assert all((r[2] == "all_reduce") == (r[1] == "collective") for r in rows), rows
PY
}

@test "dashboard in headless Chromium: a master that does not answer v1/status shows as unreachable" {
    command -v chromium > /dev/null || skip "chromium not installed (scripts/deps.sh installs it)"
    start_master
    mkdir "$TMP/site"
    for f in index.html dashboard.js dashboard.css; do get "/$f"; cp "$TMP/body" "$TMP/site/$f"; done
    kill -9 "$MPID"
    # The master's files from a server that has no v1/status (404), on the port the master's admin port had.
    python3 -m http.server --bind 127.0.0.1 --directory "$TMP/site" "$APORT" > "$TMP/site.log" 2>&1 &
    PEERS+=($!)
    for _ in $(seq 1 50); do get /index.html 2> /dev/null && break; sleep 0.1; done
    dump_dom
    grep -q '<body class="down">' "$TMP/dom.html"
    grep -q '<span id="summary">master unreachable (HTTP 404)</span>' "$TMP/dom.html"
    grep -q '<span id="health" class="health down">unreachable</span>' "$TMP/dom.html"
}
