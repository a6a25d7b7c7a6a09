"""deploy_rules.py - the run's rules for deploy/k8s, used by deploy_check.py (which parses the manifests):

- run key: every `pccl master` and `pccl join` passes --key-file (no open run); the file is a private copy (an
  init container's `install -m 0600 SECRET_FILE PATH`) in a memory emptyDir, of a key mounted from a Secret;
- NetworkPolicy: every port a pccl pod uses (container ports, --listen, --admin, --p2p-port) is admitted by a
  policy selecting it, by rules that name their ports and sources; peers reach the master's control port and each
  other's p2p port; only the namespace `monitoring` reaches the admin port; peers have a fixed --p2p-port;
- reconnect window: the master is a one-replica Recreate Deployment whose replacement on a lost node takes at most
  NODE_MONITOR_GRACE_S + its not-ready/unreachable tolerationSeconds + IMAGE_PULL_S + its startupProbe's budget,
  and every peer's PCCL_MASTER_RECONNECT_MS is longer (docs/deploy.md, "Kubernetes");
- GPU variant: deploy/k8s/gpu/ has peers; every container of a `-cuda` image limits `nvidia.com/gpu` to 1 or more,
  and every peer under gpu/ runs a `-cuda` image;
- monitoring: the master's pod is annotated for Prometheus on its admin port, and a ServiceMonitor scrapes
  /metrics through a Service port that reaches that admin port.
"""
import os
import re

# Kubernetes' defaults: node-monitor-grace-period is 40 s before 1.32 and 50 s from 1.32 on; without a toleration
# the DefaultTolerationSeconds admission plugin gives 300 s for not-ready and unreachable.
NODE_MONITOR_GRACE_S = 50
DEFAULT_TOLERATION_S = 300
# The image pull on the new node (the CPU image is about 100 MB; a cold node of a slow registry takes this long).
IMAGE_PULL_S = 60
ADMIN_NAMESPACE = {"kubernetes.io/metadata.name": "monitoring"}


def _selects(match_labels, labels):
    return all(labels.get(k) == v for k, v in (match_labels or {}).items())


def _mount_of(container, path):
    """(volumeMount, path relative to it) of the mount holding path, the deepest one."""
    best = None
    for m in container.get("volumeMounts") or []:
        mp = m.get("mountPath", "").rstrip("/")
        if path.startswith(mp + "/") and (best is None or len(mp) > len(best[0]["mountPath"].rstrip("/"))):
            best = (m, path[len(mp) + 1:])
    return best


def _volume(pod, name):
    return next((v for v in pod.get("volumes") or [] if v.get("name") == name), {})


def check_private_file(problem, w, p, flag, required):
    """The file FLAG names must be a private copy written by an init container from a Secret: pccl refuses a
    key or admin token file that is root's or group-readable, which a Secret volume is."""
    path = None
    if flag in p["args"]:
        i = p["args"].index(flag)
        path = p["args"][i + 1] if i + 1 < len(p["args"]) else None
    if not path:
        if required:
            problem(p["at"], f"`pccl {p['sub']}` has no {flag}: an open run (anyone who reaches it may join)")
        return
    mount = _mount_of(p["container"], path)
    if mount is None:
        problem(p["at"], f"{flag} {path}: no volume is mounted there")
        return
    vol = _volume(w["pod"], mount[0]["name"])
    if "secret" in vol:
        problem(p["at"], f"{flag} {path}: straight from a Secret volume, which is root's or group-readable; "
                         "pccl refuses both (copy it with install -m 0600 in an init container)")
        return
    if (vol.get("emptyDir") or {}).get("medium") != "Memory":
        problem(p["at"], f"{flag} {path}: volume {vol.get('name')} is not an emptyDir in memory")
    for init in w["pod"].get("initContainers") or []:
        cmd = [str(a) for a in (init.get("command") or []) + (init.get("args") or [])]
        if len(cmd) != 5 or cmd[:3] != ["install", "-m", "0600"]:
            continue
        src, dst = _mount_of(init, cmd[3]), _mount_of(init, cmd[4])
        if not (src and dst) or dst[0]["name"] != mount[0]["name"] or dst[1] != mount[1]:
            continue
        secret = _volume(w["pod"], src[0]["name"]).get("secret")
        if secret and secret.get("secretName"):
            mode = secret.get("defaultMode", 0o644)
            if mode & 0o007:
                problem(w["at"], f"Secret volume {src[0]['name']}: mode {mode:04o} lets others read it")
            return
    problem(p["at"], f"{flag} {path}: no init container writes it from a Secret (install -m 0600 SECRET PATH)")


def _used_ports(w):
    """{(name, number): role} of a workload: 'control', 'admin', 'p2p' from pccl's flags, else 'other'."""
    roles = {}
    for p in w["pccl"]:
        for flag, role in (("--listen", "control"), ("--admin", "admin"), ("--p2p-port", "p2p")):
            if flag in p["args"] and p["args"].index(flag) + 1 < len(p["args"]):
                roles[int(p["args"][p["args"].index(flag) + 1].rsplit(":", 1)[-1])] = role
    return {(n, num): roles.get(num, "other") for n, num in w["ports"]}


def check_network(problem, workloads, policies):
    pccl = [w for w in workloads if w["pccl"]]
    peers = [w for w in pccl if any(p["sub"] == "join" for p in w["pccl"])]
    for w in peers:
        for p in w["pccl"]:
            if p["sub"] == "join" and "--p2p-port" not in p["args"]:
                problem(p["at"], "no --p2p-port: an ephemeral p2p port, which no NetworkPolicy can name")
    for w in pccl:
        mine = [(at, pol) for at, pol in policies
                if _selects(((pol.get("spec") or {}).get("podSelector") or {}).get("matchLabels"), w["labels"])
                and "Ingress" in ((pol.get("spec") or {}).get("policyTypes") or ["Ingress"])]
        if not mine:
            problem(w["at"], "no NetworkPolicy selects its pods: every pod may reach every port")
            continue
        rules = []
        for at, pol in mine:
            for rule in (pol.get("spec") or {}).get("ingress") or []:
                if not rule.get("from"):
                    problem(at, "an ingress rule without `from` admits every source")
                if not rule.get("ports"):
                    problem(at, "an ingress rule without `ports` admits every port")
                rules.append(rule)
        for (name, num), role in sorted(_used_ports(w).items(), key=lambda x: x[0][1]):
            admit = [r for r in rules if any(pp.get("port") in (name, num) for pp in r.get("ports") or [])]
            if not admit:
                problem(w["at"], f"no NetworkPolicy admits port {num} ({name}, {role})")
                continue
            sources = [f for r in admit for f in r.get("from") or []]
            if role == "admin":
                wide = [f for f in sources if set(f) != {"namespaceSelector"}
                        or (f["namespaceSelector"] or {}).get("matchLabels") != ADMIN_NAMESPACE]
                if wide:
                    problem(w["at"], f"admin port {num} is reachable from {wide}, not only the monitoring namespace")
            elif role in ("control", "p2p"):
                for peer in peers:
                    if not any(set(f) == {"podSelector"} and
                               _selects((f["podSelector"] or {}).get("matchLabels"), peer["labels"])
                               for f in sources):
                        problem(w["at"], f"{role} port {num}: the peers of {peer['at']} may not reach it")


def _startup_budget(container):
    sp = container.get("startupProbe")
    if not sp:
        return None
    return sp.get("initialDelaySeconds", 0) + sp.get("periodSeconds", 10) * sp.get("failureThreshold", 3)


def master_replacement_bound(problem, w, container):
    """Seconds until a lost node's master runs again elsewhere (None if unbounded, reported)."""
    spec = w["doc"].get("spec") or {}
    if spec.get("replicas", 1) != 1 or (spec.get("strategy") or {}).get("type") != "Recreate":
        problem(w["at"], "the master must be one replica with strategy Recreate (never two masters)")
    evict = 0
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        t = [t for t in w["pod"].get("tolerations") or []
             if t.get("key") == key and t.get("effect") in (None, "NoExecute")]
        if t and "tolerationSeconds" not in t[0]:
            problem(w["at"], f"toleration {key} without tolerationSeconds: the pod is never replaced")
            return None
        evict = max(evict, t[0]["tolerationSeconds"] if t else DEFAULT_TOLERATION_S)
    startup = _startup_budget(container)
    if startup is None:
        problem(w["at"], "the master has no startupProbe: its start after a reschedule has no bound")
        return None
    return NODE_MONITOR_GRACE_S + evict + IMAGE_PULL_S + startup, evict, startup


def check_reconnect(problem, workloads, env_defaults):
    masters = [(w, p) for w in workloads for p in w["pccl"] if p["sub"] == "master"]
    bounds = [master_replacement_bound(problem, w, p["container"]) for w, p in masters]
    bounds = [b for b in bounds if b]
    if not bounds:
        return
    bound, evict, startup = max(bounds)
    default = int(re.sub(r"\D", "", env_defaults.get("PCCL_MASTER_RECONNECT_MS", "0")) or 0)
    for w in workloads:
        for p in w["pccl"]:
            if p["sub"] != "join":
                continue
            ms = next((int(e.get("value", 0)) for e in p["container"].get("env") or []
                       if e.get("name") == "PCCL_MASTER_RECONNECT_MS"), default)
            if ms <= bound * 1000:
                problem(p["at"], f"PCCL_MASTER_RECONNECT_MS={ms}: not longer than the master's replacement on a "
                                 f"lost node ({NODE_MONITOR_GRACE_S} s node-monitor-grace-period + {evict} s "
                                 f"toleration + {IMAGE_PULL_S} s image pull + {startup} s startup = {bound} s)")
    print(f"deploy_check: the master is replaced within {bound} s of losing its node")


def check_gpu(problem, workloads):
    gpu_peers = 0
    for w in workloads:
        under_gpu = os.sep + "gpu" + os.sep in os.sep + w["where"]
        for c in w["pod"].get("containers") or []:
            cuda = str(c.get("image", "")).endswith("-cuda")
            limit = ((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0)
            joins = any(p["container"] is c and p["sub"] == "join" for p in w["pccl"])
            if cuda and int(limit) < 1:
                problem(w["at"], f"container {c.get('name')}: a CUDA image without a `nvidia.com/gpu` limit")
            if under_gpu and joins:
                gpu_peers += 1
                if not cuda:
                    problem(w["at"], f"container {c.get('name')}: a GPU peer on the CPU image {c.get('image')}")
    if not gpu_peers:
        problem("deploy/k8s/gpu", "no GPU peer variant (a `pccl join` Deployment requesting nvidia.com/gpu)")


def check_monitoring(problem, workloads, services, others):
    admins = []
    for w in workloads:
        for p in w["pccl"]:
            if p["sub"] == "master" and "--admin" in p["args"]:
                port = int(p["args"][p["args"].index("--admin") + 1].rsplit(":", 1)[1])
                admins.append((w, port))
                ann = ((w["doc"]["spec"].get("template") or {}).get("metadata") or {}).get("annotations") or {}
                if ann.get("prometheus.io/scrape") != "true" or ann.get("prometheus.io/port") != str(port) \
                        or ann.get("prometheus.io/path", "/metrics") != "/metrics":
                    problem(w["at"], f"pod annotations do not let Prometheus scrape /metrics on port {port}")
    monitors = [(at, doc) for at, kind, doc in others if kind == "ServiceMonitor"]
    if not monitors:
        problem("deploy/k8s/monitoring", "no ServiceMonitor")
    for at, doc in monitors:
        spec = doc.get("spec") or {}
        svcs = [s for _, _, s in services
                if _selects((spec.get("selector") or {}).get("matchLabels"), (s.get("metadata") or {}).get("labels") or {})]
        if not svcs:
            problem(at, "its selector matches no Service's labels")
            continue
        for ep in spec.get("endpoints") or []:
            sp = [p for s in svcs for p in (s.get("spec") or {}).get("ports") or [] if p.get("name") == ep.get("port")]
            if not sp:
                problem(at, f"endpoint port {ep.get('port')} is no named port of the Services it selects")
            elif not any(sp[0].get("targetPort") in (name, num) and num == port
                         for w, port in admins for name, num in w["ports"]):
                problem(at, f"endpoint port {ep.get('port')} does not reach a master's admin port")
            if ep.get("path") != "/metrics":
                problem(at, f"endpoint path {ep.get('path')}, expected /metrics")


def check(problem, workloads, services, others, env_defaults):
    for w in workloads:
        for p in w["pccl"]:
            if p["sub"] in ("master", "join"):
                check_private_file(problem, w, p, "--key-file", True)
                check_private_file(problem, w, p, "--admin-token-file", False)
    check_network(problem, workloads, [(at, doc) for at, kind, doc in others if kind == "NetworkPolicy"])
    check_reconnect(problem, workloads, env_defaults)
    check_gpu(problem, workloads)
    check_monitoring(problem, workloads, services, others)
