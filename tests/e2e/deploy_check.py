#!/usr/bin/python3
"""deploy_check.py --repo DIR --bin BIN_DIR - checks deploy/Containerfile, deploy/Containerfile.cuda and
deploy/k8s/**/*.yaml without a registry, a container engine or a cluster: what can be checked against the
repository, the built `pccl` and Debian 12's package lists. Prints one line per problem and exits 1 if there is any.

Containerfiles: every image is Debian 12 (Containerfile.cuda: NVIDIA's CUDA images on Ubuntu, devel to build and
runtime to run, building with -DPCCL_WITH_CUDA=ON); COPY sources exist in the build context (or name an earlier
stage); each RUN's commands are shell builtins, scripts of the context, or programs of a package the stage installs
or the base image has; every apt-get package exists in Debian 12 (for Ubuntu's, the same names); the runtime
stage's packages provide every shared library the pccl binary needs; the final user is not root.
Kubernetes: every document has apiVersion, kind and metadata.name (and the apiVersion its kind lives in);
selectors match their pod template's labels; Services select a Deployment and target its container ports;
container ports are EXPOSEd by the image (a `-cuda` tag: by Containerfile.cuda); `pccl` arguments are a subcommand
and flags it documents, with ports that are the container's; `--master HOST:PORT` names a Service port that reaches
a master's control port; env names are the ones README's configuration table documents; volume mounts name
volumes. The run's rules (deploy_rules.py): run key, NetworkPolicy, reconnect window, GPU variant, monitoring.
kubeconform or kubeval, when installed, also validate against the Kubernetes schemas.
"""
import argparse
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

import yaml

import deploy_rules

PROBLEMS = []


def problem(where, msg):
    PROBLEMS.append(f"{where}: {msg}")


# ---------------------------------------------------------------- Containerfile

def instructions(path):
    """(line number, instruction, argument text) with continuations joined and comments dropped."""
    out, buf, start = [], "", 0
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not buf and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if buf and line.lstrip().startswith("#"):
                continue
            if not buf:
                start = n
            stripped = line.rstrip("\n")
            if stripped.endswith("\\"):
                buf += stripped[:-1] + " "
                continue
            buf += stripped
            word, _, rest = buf.strip().partition(" ")
            out.append((start, word.upper(), rest.strip()))
            buf = ""
    return out


def dpkg_base():
    """Packages of a minimal Debian image: Priority required, and what they depend on directly."""
    rows = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Priority}\t${Depends}, ${Pre-Depends}\n"],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    base = set()
    for row in rows:
        pkg, prio, deps = row.split("\t")
        if prio == "required":
            base.add(pkg)
            base.update(re.findall(r"(?:^|[,|]\s*)([a-z0-9][a-z0-9+.-]*)", deps))
    return base


_owners = None


def owner(path):
    """The Debian package that ships PATH on this machine (trying the /usr-merged twin), or None. Reads dpkg's
    file lists once (what `dpkg -S` searches, without a process per path)."""
    global _owners
    if _owners is None:
        _owners = {}
        for lst in glob.glob("/var/lib/dpkg/info/*.list"):
            pkg = os.path.basename(lst)[:-len(".list")].split(":")[0]
            with open(lst, errors="replace") as f:
                for line in f:
                    _owners.setdefault(line.rstrip("\n"), pkg)
    cands = [path, os.path.realpath(path)]
    for c in list(cands):
        if c.startswith("/usr/"):
            cands.append(c[4:])
        else:
            cands.append("/usr" + c)
    for c in cands:
        if c in _owners:
            return _owners[c]
    return None


def apt_known(pkgs):
    """Which of pkgs Debian's package lists know (one apt-cache call for all)."""
    if not pkgs:
        return set()
    r = subprocess.run(["apt-cache", "show", "--no-all-versions"] + sorted(pkgs), capture_output=True, text=True)
    return set(re.findall(r"^Package: (\S+)$", r.stdout, re.M))


def simple_commands(cmd):
    """The words of every simple command of a shell command line, without leading VAR=value assignments."""
    out = []
    for part in re.split(r"&&|\|\||;|\|", cmd):
        words = shlex.split(part)
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words.pop(0)
        if words:
            out.append(words)
    return out


def apt_packages(words):
    if words[0] != "apt-get" or "install" not in words:
        return []
    return [w for w in words[words.index("install") + 1:] if not w.startswith("-")]


# Base images: Debian 12 for the CPU image; NVIDIA's CUDA images (Ubuntu, of the Debian family) for the GPU one.
DEBIAN_BASE = r"(docker\.io/(library/)?)?debian:12(-slim)?$"
CUDA_BASE = r"(docker\.io/|nvcr\.io/)?nvidia/cuda:\d+\.\d+(\.\d+)?-(devel|runtime)-ubuntu(22|24)\.04$"


def check_containerfile(repo, bin_dir, name="Containerfile", base_re=DEBIAN_BASE):
    path = os.path.join(repo, "deploy", name)
    where = os.path.relpath(path, repo)
    if not os.path.isfile(path):
        problem(where, "missing")
        return set()
    base = dpkg_base()
    stages, stage, exposed = [], None, set()
    asked = []  # (where, apt package), checked at the end with one apt-cache call
    for n, instr, arg in instructions(path):
        at = f"{where}:{n}"
        if instr == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?$", arg, re.I)
            image, sname = m.group(1), m.group(2)
            if not re.match(base_re, image):
                problem(at, f"base image {image} is not " + ("a CUDA image" if base_re == CUDA_BASE else "Debian 12"))
            stage = {"name": sname, "image": image, "apt": set(), "user": "root", "workdir": "/", "copied": {},
                     "run": ""}
            stages.append(stage)
        elif stage is None:
            problem(at, f"{instr} before FROM")
        elif instr == "WORKDIR":
            stage["workdir"] = os.path.join(stage["workdir"], arg)
        elif instr in ("COPY", "ADD"):
            words = shlex.split(arg)
            opts = [w for w in words if w.startswith("--")]
            srcs, dest = [w for w in words if not w.startswith("--")][:-1], words[-1]
            dest = os.path.join(stage["workdir"], dest)
            frm = [o.split("=", 1)[1] for o in opts if o.startswith("--from=")]
            if frm:
                if frm[0] not in [s["name"] for s in stages[:-1]]:
                    problem(at, f"COPY --from={frm[0]}: no earlier stage of that name")
                continue
            for s in srcs:
                if not glob.glob(os.path.join(repo, s)):
                    problem(at, f"COPY source {s} is not in the build context")
                elif os.path.normpath(s) == ".":
                    stage["copied"][dest] = repo
        elif instr == "RUN":
            stage["run"] += arg + "\n"
            cmds = simple_commands(arg)
            for words in cmds:
                for pkg in apt_packages(words):
                    asked.append((at, pkg))
                    stage["apt"].add(pkg)
            for c in [words[0] for words in cmds]:
                if "/" in c:  # a script of the context, copied into the image
                    src = None
                    full = os.path.normpath(os.path.join(stage["workdir"], c))
                    for dest, ctx in stage["copied"].items():
                        if full.startswith(os.path.normpath(dest) + "/"):
                            src = os.path.join(ctx, os.path.relpath(full, os.path.normpath(dest)))
                    if not (src and os.access(src, os.X_OK)):
                        problem(at, f"RUN {c}: not an executable of the build context")
                    continue
                kind = subprocess.run(["bash", "-c", f"type -t {shlex.quote(c)}"],
                                      capture_output=True, text=True).stdout.strip()
                if kind in ("builtin", "keyword"):
                    continue
                exe = shutil.which(c, path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
                pkg = owner(exe) if exe else None
                if pkg is None:
                    problem(at, f"RUN {c}: no Debian package ships this command")
                elif pkg not in base and pkg not in stage["apt"]:
                    problem(at, f"RUN {c}: from package {pkg}, which this stage does not install")
        elif instr == "USER":
            stage["user"] = arg.split(":")[0]
        elif instr == "EXPOSE":
            exposed.update(int(p.split("/")[0]) for p in arg.split())
    known = apt_known({pkg for _, pkg in asked})
    for at, pkg in asked:
        if pkg not in known:
            problem(at, f"apt package {pkg} is not in Debian 12")
    if not stages:
        problem(where, "no FROM")
        return exposed
    final = stages[-1]
    if final["user"] in ("root", "0"):
        problem(where, "the final stage runs as root (USER)")
    if len(stages) < 2:
        problem(where, "not multi-stage: the runtime image would carry the build tools")
    if base_re == CUDA_BASE:
        if "-devel-" not in stages[0]["image"] or "-DPCCL_WITH_CUDA=ON" not in stages[0]["run"]:
            problem(where, "the build stage must be a CUDA devel image building with -DPCCL_WITH_CUDA=ON")
        if "-runtime-" not in final["image"]:
            problem(where, f"the final stage {final['image']} is not a CUDA runtime image")
    # The runtime stage must provide every shared library the pccl binary needs.
    elf = subprocess.run(["readelf", "-d", os.path.join(bin_dir, "pccl")], capture_output=True, text=True).stdout
    for soname in re.findall(r"\(NEEDED\).*\[(.+)\]", elf):
        found = [p for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64")
                 for p in [os.path.join(d, soname)] if os.path.exists(p)]
        pkg = owner(found[0]) if found else None
        if pkg is None:
            continue  # not a Debian library (the CUDA runtime of a CUDA build; the image is built without CUDA)
        if pkg not in base and pkg not in final["apt"]:
            problem(where, f"pccl needs {soname} (package {pkg}), which the runtime stage does not install")
    return exposed


# ---------------------------------------------------------------- Kubernetes

API_VERSIONS = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "Service": "v1",
                "Secret": "v1", "ConfigMap": "v1", "PodDisruptionBudget": "policy/v1",
                "NetworkPolicy": "networking.k8s.io/v1", "ServiceMonitor": "monitoring.coreos.com/v1"}


def readme_env(repo):
    """README's configuration table: {name: default column}."""
    names = {}
    with open(os.path.join(repo, "README.md")) as f:
        for line in f:
            m = re.match(r"\|\s*`(PCCL_[A-Z0-9_]+)`\s*\|.*\|\s*([^|]*?)\s*\|\s*$", line)
            if m:
                names[m.group(1)] = m.group(2)
    return names


def pccl_help(bin_dir, sub):
    r = subprocess.run([os.path.join(bin_dir, "pccl")] + ([sub, "--help"] if sub else ["--help"]),
                       capture_output=True, text=True)
    return r.stdout + r.stderr


def container_ports(container):
    return {(p.get("name"), p.get("containerPort")) for p in container.get("ports") or []}


def flag_value(args, flag):
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def check_pccl_args(at, container, bin_dir, commands):
    args = [str(a) for a in (container.get("command") or [])[1:] + (container.get("args") or [])]
    if not args:
        return None, []
    sub = args[0]
    if sub not in commands:
        problem(at, f"`pccl {sub}`: not a pccl command")
        return None, []
    helptext = pccl_help(bin_dir, sub)
    ports = {p for _, p in container_ports(container)}
    for i, a in enumerate(args[1:], 1):
        if a.startswith("--"):
            flag = a.split("=")[0]
            if not re.search(re.escape(flag) + r"\b", helptext):
                problem(at, f"`pccl {sub}` has no flag {flag}")
            if flag in ("--listen", "--admin", "--p2p-port") and i + 1 < len(args):
                port = int(args[i + 1].rsplit(":", 1)[-1])
                if port not in ports:
                    problem(at, f"{flag} {args[i + 1]}: port {port} is not a containerPort")
    return sub, args


def load_manifests(repo):
    """[(where, doc)] of deploy/k8s/**/*.yaml, or problems for what does not parse."""
    files = sorted(glob.glob(os.path.join(repo, "deploy", "k8s", "**", "*.yaml"), recursive=True))
    out = []
    for path in files:
        where = os.path.relpath(path, repo)
        with open(path) as f:
            try:
                docs = [d for d in yaml.safe_load_all(f) if d is not None]
            except yaml.YAMLError as e:
                problem(where, f"not YAML: {e}")
                continue
        for i, doc in enumerate(docs):
            if not isinstance(doc, dict):
                problem(f"{where}[{i}]", "not a mapping")
                continue
            out.append((where, doc))
    return files, out


def check_k8s(repo, bin_dir, exposed):
    files, docs = load_manifests(repo)
    if not files:
        problem("deploy/k8s", "no manifests")
        return
    env = readme_env(repo)
    commands = set(re.findall(r"^  ([a-z][a-z-]+)\s", pccl_help(bin_dir, None), re.M))
    workloads, services, others = [], [], []
    for where, doc in docs:
        kind, api = doc.get("kind"), doc.get("apiVersion")
        name = (doc.get("metadata") or {}).get("name")
        if not (kind and api and name):
            problem(where, "a document needs apiVersion, kind and metadata.name")
            continue
        at = f"{where}: {kind}/{name}"
        if kind in API_VERSIONS and api != API_VERSIONS[kind]:
            problem(at, f"apiVersion {api}, expected {API_VERSIONS[kind]}")
        spec = doc.get("spec") or {}
        if kind in ("Deployment", "StatefulSet", "DaemonSet"):
            tmpl = spec.get("template") or {}
            labels = (tmpl.get("metadata") or {}).get("labels") or {}
            sel = (spec.get("selector") or {}).get("matchLabels") or {}
            if not sel or any(labels.get(k) != v for k, v in sel.items()):
                problem(at, f"selector {sel} does not match the template's labels {labels}")
            pod = tmpl.get("spec") or {}
            volumes = {v.get("name") for v in pod.get("volumes") or []}
            w = {"at": at, "where": where, "doc": doc, "labels": labels, "pod": pod, "ports": set(), "pccl": []}
            for c in (pod.get("initContainers") or []) + (pod.get("containers") or []):
                cat = f"{at} container {c.get('name')}"
                if not c.get("name") or not c.get("image"):
                    problem(cat, "needs name and image")
                for e in c.get("env") or []:
                    if e.get("name") not in env:
                        problem(cat, f"env {e.get('name')} is not in README's configuration table")
                image_file = "Containerfile.cuda" if str(c.get("image", "")).endswith("-cuda") else "Containerfile"
                for pname, num in container_ports(c):
                    if num not in exposed.get(image_file, set()):
                        problem(cat, f"containerPort {num} is not EXPOSEd by deploy/{image_file}")
                for m in c.get("volumeMounts") or []:
                    if m.get("name") not in volumes:
                        problem(cat, f"volumeMount {m.get('name')} names no volume")
                if c in (pod.get("initContainers") or []):
                    continue
                w["ports"] |= container_ports(c)
                sub, args = check_pccl_args(cat, c, bin_dir, commands)
                if sub:
                    w["pccl"].append({"at": cat, "container": c, "sub": sub, "args": args})
            workloads.append(w)
        elif kind == "Service":
            services.append((at, name, doc))
        else:
            others.append((at, kind, doc))
    svc_ports = {}
    for at, name, doc in services:
        spec = doc.get("spec") or {}
        sel = spec.get("selector") or {}
        matched = [w for w in workloads if sel and all(w["labels"].get(k) == v for k, v in sel.items())]
        if not matched:
            problem(at, f"selector {sel} matches no workload's pod labels")
            continue
        for sp in spec.get("ports") or []:
            target = sp.get("targetPort", sp.get("port"))
            hit = [num for pname, num in matched[0]["ports"] if target in (pname, num)]
            if not hit:
                problem(at, f"targetPort {target} is no containerPort of the pods it selects")
                continue
            svc_ports[(name, sp.get("port"))] = (matched[0], hit[0], sp.get("name"))
    masters = [(w, p) for w in workloads for p in w["pccl"] if p["sub"] == "master"]
    for w in workloads:
        for p in w["pccl"]:
            addr = flag_value(p["args"], "--master") if p["sub"] == "join" else None
            if addr is None:
                continue
            host, _, port = addr.rpartition(":")
            target = svc_ports.get((host, int(port)))
            if target is None:
                problem(p["at"], f"--master {addr}: no Service port of that name and number")
            elif not any(mw is target[0] and flag_value(mp["args"], "--listen") and
                         int(flag_value(mp["args"], "--listen").rsplit(":", 1)[1]) == target[1]
                         for mw, mp in masters):
                problem(p["at"], f"--master {addr}: the Service port does not reach a master's --listen port")
    deploy_rules.check(problem, workloads, services, others, env)
    validate_schemas(files)


def validate_schemas(files):
    for tool, argv in (("kubeconform", ["kubeconform", "-strict", "-summary", "-ignore-missing-schemas"]),
                       ("kubeval", ["kubeval", "--strict", "--ignore-missing-schemas"])):
        if shutil.which(tool):
            r = subprocess.run(argv + files, capture_output=True, text=True)
            if r.returncode != 0:
                problem("deploy/k8s", f"{tool}: {r.stdout}{r.stderr}")
            break
    else:
        print("deploy_check: kubeconform/kubeval not installed (not in Debian 12): structural checks only")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    exposed = {"Containerfile": check_containerfile(a.repo, a.bin),
               "Containerfile.cuda": check_containerfile(a.repo, a.bin, "Containerfile.cuda", CUDA_BASE)}
    check_k8s(a.repo, a.bin, exposed)
    for p in PROBLEMS:
        print(p)
    if PROBLEMS:
        return 1
    print("deploy_check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
