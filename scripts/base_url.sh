# Sourced by scripts/run.sh (and tests/test_base_url.py): the console's
# address for links in alerts (CRONBOARD_BASE_URL), from gunicorn's --bind.

# base_url_for_bind BIND: prints http://HOST:PORT for a TCP bind (HOST,
# HOST:PORT, [IPv6]:PORT), nothing for a unix: or fd:// bind, which no
# browser reaches. A bind to every interface (0.0.0.0, [::]) is reached by
# this host's name, so that is the address printed.
base_url_for_bind() {
  local bind=$1 host port
  case $bind in
    unix:* | fd://*) return 0 ;;
  esac
  if [[ $bind == \[* ]]; then
    host=${bind%%]*}]
    port=${bind#*]}
    port=${port#:}
  elif [[ $bind == *:* ]]; then
    host=${bind%:*}
    port=${bind##*:}
  else
    host=$bind
    port=""
  fi
  port=${port:-8000}  # gunicorn's default port
  local bare=${host#[}
  bare=${bare%]}
  if [[ -z $bare || $bare =~ ^[0:.]+$ ]]; then
    host=$(hostname -f 2>/dev/null || hostname 2>/dev/null || true)
    host=${host:-localhost}
  fi
  printf 'http://%s:%s\n' "$host" "$port"
}

# base_url_is_set ENV_FILE: true when CRONBOARD_BASE_URL is in the
# environment or in the .env file settings read (the operator's value wins).
base_url_is_set() {
  [ -n "${CRONBOARD_BASE_URL:-}" ] && return 0
  [ -f "$1" ] && grep -Eq '^[[:space:]]*(export[[:space:]]+)?CRONBOARD_BASE_URL[[:space:]]*=' "$1"
}
