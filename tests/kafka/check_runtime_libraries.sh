#!/usr/bin/env bash
# Checks that the Dockerfile's runtime stage installs every shared library the given binaries
# link: the Debian package of each library must be in RUNTIME_PACKAGES, or be pulled in by one
# of them or by what every Debian image has (the Essential packages and apt), through
# Depends and Pre-Depends as installed here.
#   check_runtime_libraries.sh DOCKERFILE BINARY...
set -euo pipefail
dockerfile=$1
shift
listed=$(sed -n '/^ARG RUNTIME_PACKAGES="/,/"$/p' "$dockerfile" |
  sed -e 's/^ARG RUNTIME_PACKAGES="//' -e 's/[\\"]//g' | tr -s ' \n' '\n' | grep -v '^$' || true)
if [[ -z "$listed" ]]; then
  echo "no ARG RUNTIME_PACKAGES=\"...\" in $dockerfile" >&2
  exit 1
fi
roots="$(echo "$listed" | tr '\n' ' ') apt $(dpkg-query -W -f='${Package} ${Essential}\n' |
  awk '$2 == "yes" {print $1}' | tr '\n' ' ')"
covered=$(dpkg-query -W -f='${Package}\t${Depends}, ${Pre-Depends}\n' |
  awk -F'\t' -v roots="$roots" '
    { name = $1; sub(/:.*/, "", name); deps[name] = $2 }
    END {
      n = split(roots, queue, " ")
      for (i = 1; i <= n; i++) seen[queue[i]] = 1
      for (i = 1; i <= n; i++) {
        print queue[i]
        m = split(deps[queue[i]], alternatives, /[,|]/)
        for (j = 1; j <= m; j++) {
          d = alternatives[j]
          gsub(/\([^)]*\)|:any/, "", d)
          gsub(/^ +| +$/, "", d)
          if (d != "" && !(d in seen)) { seen[d] = 1; queue[++n] = d }
        }
      }
    }' | sort -u)
# Every library the binaries link, resolved once, and its package (one dpkg -S for all).
mapfile -t libraries < <(for binary in "$@"; do ldd "$binary"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | xargs -r readlink -f | sort -u)
if ((${#libraries[@]} == 0)); then
  echo "no shared libraries found in $*" >&2
  exit 1
fi
# dpkg knows a library by the path its package ships, /lib/... or /usr/lib/... (merged /usr).
owners=$(for library in "${libraries[@]}"; do
  echo "$library"
  [[ "$library" == /usr/* ]] && echo "${library#/usr}"
done | xargs dpkg -S 2>/dev/null || true)
missing=0
for library in "${libraries[@]}"; do
  package=$(awk -v lib="$library" '{path = $NF} path == lib {sub(/:.*/, "", $1); print $1; exit}' \
    <<<"$owners")
  if [[ -z "$package" ]]; then
    package=$(awk -v lib="${library#/usr}" '$NF == lib {sub(/:.*/, "", $1); print $1; exit}' \
      <<<"$owners")
  fi
  if [[ -z "$package" ]]; then
    echo "$library belongs to no Debian package" >&2
    missing=1
  elif ! grep -qx "$package" <<<"$covered"; then
    echo "$library ($package) is not installed by the runtime stage" >&2
    missing=1
  fi
done
if ((missing)); then exit 1; fi
echo "the ${#libraries[@]} libraries of $# binaries are in the runtime stage"
