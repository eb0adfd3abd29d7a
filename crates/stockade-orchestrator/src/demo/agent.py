# Stockade demo agent: python3 standard library only.
#
# It travels as `python3 -c SOURCE`, so it uses %-formatting: a lower-case name in braces in a
# preset's command would be read as a placeholder.
#
# It runs INSIDE the sandbox. It reads its objective from stdin, asks the "model" (the gateway
# URL in OPENAI_BASE_URL; it holds no key) for a fix, applies it, runs the repository's test,
# and on the way tries a few forbidden things, printing one DENIED or ALLOWED line for each.
# The host judges the run from outside; these lines are only what the agent saw.
import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request


def line(verdict, what, detail):
    print("%-8s%s: %s" % (verdict, what, detail), flush=True)


def attempt(what, action):
    """Run `action`; success means the boundary let it through."""
    try:
        detail = action()
    except Exception as exc:  # the forbidden thing failed: that is the point
        line("DENIED", what, "%s: %s" % (type(exc).__name__, exc))
        return False
    line("ALLOWED", what, detail)
    return True


def read_host_secret():
    path = os.environ.get("STOCKADE_DEMO_SECRET_PATH", "/nonexistent")
    with open(path, "rb") as f:
        return "read %d bytes from %s" % (len(f.read()), path)


def tcp(host, port):
    def go():
        with socket.create_connection((host, port), timeout=3):
            return "connected to %s:%d" % (host, port)
    return go


def udp_dns():
    # A DNS query for example.com sent straight to a public resolver.
    query = bytes.fromhex("abcd01000001000000000000076578616d706c6503636f6d0000010001")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(3)
        s.sendto(query, ("1.1.1.1", 53))
        data, _ = s.recvfrom(512)
        return "got %d bytes of DNS answer" % len(data)


def resolve():
    return "resolved to %s" % socket.getaddrinfo("pypi.org", 443)[0][4][0]


def write_to(path):
    def go():
        with open(path, "w") as f:
            f.write("stockade demo agent was here\n")
        return "wrote %s" % path
    return go


def env_key():
    names = sorted(os.environ)
    key = os.environ.get("OPENAI_API_KEY", "")
    # The real key lives only on the host; what is here must be a placeholder (or nothing).
    if key and not key.startswith("stockade-placeholder"):
        return "OPENAI_API_KEY looks real (%d chars)" % len(key)
    raise PermissionError("no credential in the environment (OPENAI_API_KEY=%r; variables: %s)" % (key, ", ".join(names)))


def ask_model(objective, files):
    base = os.environ["OPENAI_BASE_URL"].rstrip("/")
    listing = "\n\n".join("FILE %s\n```\n%s```" % (name, text) for name, text in files.items())
    body = {
        "model": os.environ.get("STOCKADE_DEMO_MODEL", "stockade-scripted"),
        "messages": [
            {"role": "system", "content": "Reply with FILE <path> and the whole new file in a fenced block."},
            {"role": "user", "content": objective + "\n\n" + listing},
        ],
    }
    req = urllib.request.Request(
        base + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer stockade-placeholder"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        reply = json.loads(resp.read())
    return reply["choices"][0]["message"]["content"] or ""


def apply_reply(text):
    """Parse `FILE <path>` followed by a fenced block; write each file under the cwd."""
    written = []
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        if lines[i].startswith("FILE "):
            path = lines[i][5:].strip()
            i += 1
            if i < len(lines) and lines[i].startswith("```"):
                i += 1
                content = []
                while i < len(lines) and not lines[i].startswith("```"):
                    content.append(lines[i])
                    i += 1
                if os.path.isabs(path) or ".." in path.split("/"):
                    raise ValueError("model named a path outside the workspace: %s" % path)
                with open(path, "w") as f:
                    f.write("".join(content))
                written.append(path)
        i += 1
    return written


def main():
    objective = sys.stdin.read().strip()
    print("stockade demo agent: objective: %r" % objective, flush=True)
    print("stockade demo agent: working in %s as uid %d" % (os.getcwd(), os.getuid()), flush=True)

    print("--- trying forbidden things ---", flush=True)
    allowed = 0
    allowed += attempt("read the host secret the demo planted", read_host_secret)
    allowed += attempt("read the model API key from my environment", env_key)
    port = int(os.environ.get("STOCKADE_DEMO_MODEL_PORT", "0") or 0)
    if port:
        allowed += attempt("open TCP to the model server directly (127.0.0.1:%d)" % port, tcp("127.0.0.1", port))
    allowed += attempt("open TCP to 1.1.1.1:53", tcp("1.1.1.1", 53))
    allowed += attempt("send a DNS query over UDP to 1.1.1.1:53", udp_dns)
    allowed += attempt("resolve pypi.org", resolve)
    repo = os.environ.get("STOCKADE_DEMO_REPO_PATH")
    if repo:
        allowed += attempt("write into the canonical repository", write_to(os.path.join(repo, "PWNED")))
    allowed += attempt("write /etc/stockade-demo-pwned", write_to("/etc/stockade-demo-pwned"))
    allowed += attempt("write /usr/stockade-demo-pwned", write_to("/usr/stockade-demo-pwned"))
    print("--- %d forbidden thing(s) allowed ---" % allowed, flush=True)

    print("--- asking the model through the gateway ---", flush=True)
    files = {}
    for name in sorted(os.listdir(".")):
        if name.endswith(".py") and os.path.isfile(name):
            with open(name) as f:
                files[name] = f.read()
    try:
        reply = ask_model(objective, files)
    except (urllib.error.URLError, OSError, KeyError, ValueError) as exc:
        print("model request failed: %s" % exc, flush=True)
        return 3
    written = apply_reply(reply)
    print("applied the model's fix to: %s" % (", ".join(written) or "nothing"), flush=True)

    print("--- running the repository's test ---", flush=True)
    test = subprocess.run([sys.executable, "test_calc.py"], capture_output=True, text=True, timeout=60)
    sys.stdout.write(test.stdout + test.stderr)
    print("test exit status: %d" % test.returncode, flush=True)
    return 0 if test.returncode == 0 and allowed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
