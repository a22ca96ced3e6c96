#!/usr/bin/env bash
# Installs what real_er.test.mjs needs to run the MagicBlock ephemeral validator on Debian 12,
# into tests/e2e/real_er (node_modules/ and .runtime/, both git-ignored). Idempotent; quiet when
# everything is there. Prints the runtime directory's path on its last line.
#   - the npm package @magicblock-labs/ephemeral-validator (pinned in package-lock.json);
#   - glibc, libstdc++ and libgcc from Debian trixie: the validator's binary needs glibc >= 2.38
#     and Debian 12 has 2.36. They are fetched with apt-get download from a private sources list
#     (the same mirror host as the system's), unpacked into .runtime/root, and the binary is
#     started through that root's dynamic loader; the system's libraries are not touched;
#   - setrlimit_clamp.so, an LD_PRELOAD shim: the validator aborts when it cannot raise its
#     open-file limit to 1,000,000.
set -euo pipefail
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
runtime="$dir/.runtime"
cd "$dir"
exec 9>"$dir/.setup.lock"
flock 9

if [[ ! -x node_modules/@magicblock-labs/ephemeral-validator-linux-x64/bin/ephemeral-validator ]]; then
  timeout 600 npm ci --no-audit --no-fund --loglevel=error >&2
fi

libdir="$runtime/root/usr/lib/x86_64-linux-gnu"
if [[ ! -x "$libdir/ld-linux-x86-64.so.2" || ! -e "$libdir/libstdc++.so.6" ||
      ! -e "$libdir/libgcc_s.so.1" ]]; then
  # The Debian mirror of the system's own sources.
  system_uri="$(grep -rhoE '^(URIs:|deb) +\S*https?://[^ ]+/debian/?( |$)' \
    /etc/apt/sources.list /etc/apt/sources.list.d 2>/dev/null | grep -oE 'https?://[^ ]+' |
    grep -v security | head -1 || true)"
  if [[ -z "$system_uri" ]]; then
    echo "real_er/setup.sh: no Debian mirror found in /etc/apt/sources.list(.d)" >&2
    exit 1
  fi
  mirror="${system_uri%/}"
  apt="$runtime/apt"
  rm -rf "$apt" "$runtime/root"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs" "$runtime/root"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" \
    >"$apt/sources.list"
  opts=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=/nonexistent"
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
        -o "APT::Sandbox::User=root" -qq)
  timeout 300 apt-get "${opts[@]}" update >&2
  (cd "$apt/debs" && timeout 300 apt-get "${opts[@]}" download libc6 libstdc++6 libgcc-s1 >&2)
  for deb in "$apt/debs"/*.deb; do dpkg-deb -x "$deb" "$runtime/root"; done
  rm -rf "$apt/lists" "$apt/cache"
fi

if [[ ! -e "$runtime/setrlimit_clamp.so" || setrlimit_clamp.c -nt "$runtime/setrlimit_clamp.so" ]]; then
  gcc -shared -fPIC -O2 -o "$runtime/setrlimit_clamp.so" setrlimit_clamp.c -ldl
fi
echo "$runtime"
