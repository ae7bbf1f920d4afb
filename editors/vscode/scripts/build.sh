#!/usr/bin/env bash
# Builds the extension from the lock file and packages it; prints the path of the .vsix (the
# rest goes to stderr). The system Node (20) is enough: @vscode/vsce 3.x runs on Node 20 (4.x
# needs 22). node_modules is reinstalled (npm ci) only when package-lock.json changed since the
# last install, so a rebuild takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
{
    stamp=node_modules/.drtriton-lock-sha256
    lock="$(sha256sum package-lock.json | cut -d' ' -f1)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$lock" ]]; then
        echo "node_modules matches package-lock.json"
    else
        npm ci --no-audit --no-fund --prefer-offline
        echo "$lock" >"$stamp"
    fi
    rm -rf out
    npx --no-install tsc -p .
    # the README's screenshots are relative links into media/, which the .vsix carries
    npx --no-install vsce package --skip-license --allow-missing-repository --no-rewrite-relative-links \
        -o drtriton.vsix
} >&2
echo "$PWD/drtriton.vsix"
