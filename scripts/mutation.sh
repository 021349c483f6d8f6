#!/usr/bin/env bash
# Mutation testing of the cron engine, the fence and the engine's planning and
# outcomes with mutmut (pinned in requirements-dev.txt, configured in
# pyproject.toml [tool.mutmut]); see docs/development.md, "Mutation testing".
# Not part of CI's default run: a full run takes hours on one core.
#
#   scripts/mutation.sh                  run (resuming from mutants/), then print the scores
#   scripts/mutation.sh --fresh          throw mutants/ away first: every mutant is run again
#   scripts/mutation.sh --max-children 2 worker processes (default 1: the machine is shared)
#   scripts/mutation.sh --module jobs/cron.py --module jobs/fence.py
#                                        only these modules' mutants, judged by their own tests
#                                        (tests/mutmut_plugin.py TESTS_BY_MODULE); with --fresh
#   scripts/mutation.sh --only 'jobs.cron.x_parse*'   only the mutants whose names match
#   scripts/mutation.sh --scores         print the scores of the last run only
#
# Survivors afterwards: .venv/bin/mutmut results; one diff: .venv/bin/mutmut show <name>.
set -euo pipefail
cd "$(dirname "$0")/.."

fresh=0
children=1
run=1
only=()
modules=()
while [ $# -gt 0 ]; do
  case "$1" in
    --fresh) fresh=1 ;;
    --max-children) children="$2"; shift ;;
    --scores) run=0 ;;
    --only) only+=("$2"); shift ;;
    --module) modules+=("$2"); shift ;;
    *) echo "usage: $0 [--fresh] [--max-children N] [--module jobs/X.py] [--only PATTERN] [--scores]" >&2; exit 2 ;;
  esac
  shift
done

if [ "$run" = 1 ]; then
  # jobs/engine/planning.py -> the mutant names jobs.engine.planning.*
  for module in ${modules[@]+"${modules[@]}"}; do
    name=${module%.py}
    only+=("${name//\//.}.*")
  done
  MUTATION_MODULES=$(IFS=,; echo "${modules[*]+"${modules[*]}"}")
  export MUTATION_MODULES
  # mutmut keeps which tests cover which function from its first pass; that
  # pass is only right for the modules it was taken with.
  if [ "$fresh" = 0 ] && [ -f mutants/modules ] && [ "$(cat mutants/modules)" != "$MUTATION_MODULES" ]; then
    echo "mutants/ was run for modules '$(cat mutants/modules)': add --fresh to run '$MUTATION_MODULES'" >&2
    exit 2
  fi
  [ "$fresh" = 1 ] && rm -rf mutants
  mkdir -p mutants
  echo "$MUTATION_MODULES" > mutants/modules
  echo "mutmut run --max-children $children (progress in mutants/run.log)"
  # mutmut draws a progress spinner on every mutant; keep it out of the terminal.
  status=0
  .venv/bin/mutmut run --max-children "$children" ${only[@]+"${only[@]}"} > mutants/run.log 2>&1 || status=$?
  if [ "$status" != 0 ]; then
    tail -n 40 mutants/run.log
    echo "mutmut run failed (exit $status)" >&2
    exit "$status"
  fi
fi

# Every mutant with its status, grouped by module. Killed and timed-out
# mutants count as caught; everything else (survived, no tests, suspicious,
# not checked) counts against the score, equivalent mutants included.
.venv/bin/mutmut results --all true | awk '
  /__mutmut_[0-9]+: / {
    name = $1; sub(/:$/, "", name)
    status = $0; sub(/^[^:]*: /, "", status)
    # jobs.engine.planning.xǁPlannerǁplan_fire__mutmut_3 -> jobs/engine/planning.py
    n = split(name, part, ".")
    module = part[1]
    for (i = 2; i <= n && substr(part[i], 1, 2) != "x_" && index(part[i], "xǁ") != 1; i++) module = module "/" part[i]
    module = module ".py"
    total[module]++
    if (status == "killed" || status == "timeout") caught[module]++
    else left[module] = left[module] "    " name ": " status "\n"
  }
  END {
    if (length(total) == 0) { print "no mutants found: run mutmut first"; exit 1 }
    printf "%-26s %8s %8s %8s %8s\n", "module", "mutants", "caught", "left", "score"
    for (m in total) {
      printf "%-26s %8d %8d %8d %7.1f%%\n", m, total[m], caught[m], total[m] - caught[m], 100 * caught[m] / total[m]
    }
    for (m in left) { printf "\nnot caught in %s:\n%s", m, left[m] }
  }'
