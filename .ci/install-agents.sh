#!/usr/bin/env bash
# Installs the real coding agents the end-to-end tests drive, each into its own place that a
# Stockade preset mounts read-only. Idempotent: nothing is installed that is already there.
#
#   mini-SWE-agent  -> /opt/stockade-venvs/mini-swe-agent  (PyPI mini-swe-agent, pinned)
#
# Needs: /usr/bin/python3 with the venv module (Debian: python3-venv), network access to PyPI.
# .ci/run calls this script; run it by hand before `cargo test` to enable tests/it/agent_e2e.rs.
set -euo pipefail

MINI_VERSION="${STOCKADE_MINI_SWE_AGENT_VERSION:-2.4.6}"
VENVS="${STOCKADE_VENVS:-/opt/stockade-venvs}"
note() { echo "==> install-agents: $*"; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# The venv must be built on /usr/bin/python3: the sandbox exposes the host's system
# directories read-only, not a pyenv or a home-directory interpreter.
if ! /usr/bin/python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  note "apt-get install python3-venv"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv
fi

mini="$VENVS/mini-swe-agent"
if [ -x "$mini/bin/mini" ] && "$mini/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mini-swe-agent') != '$MINI_VERSION')" 2>/dev/null; then
  note "mini-swe-agent $MINI_VERSION already in $mini"
else
  note "installing mini-swe-agent $MINI_VERSION into $mini"
  $SUDO mkdir -p "$VENVS"
  # A venv records its own path, so it is built in place; a half-built one is removed first.
  $SUDO rm -rf "$mini"
  if ! { $SUDO /usr/bin/python3 -m venv "$mini" &&
         $SUDO "$mini/bin/pip" install --quiet --disable-pip-version-check "mini-swe-agent==$MINI_VERSION"; }; then
    $SUDO rm -rf "$mini"
    echo "install-agents: installing mini-swe-agent failed" >&2
    exit 1
  fi
fi
"$mini/bin/python" -c "import minisweagent, litellm" >/dev/null 2>&1 || { echo "install-agents: mini-swe-agent does not import" >&2; exit 1; }
note "done"
