#!/usr/bin/env bash
# monitoring/docs-base.sh BASE [FILE...]: set the base of every runbook
# link (runbook_url of the Prometheus rules, the Grafana dashboard's links)
# to BASE, the address where your copy of pgque_bgw's docs/ directory is
# published: a Git server's view of the docs/ of the release you run, or an
# internal copy.  The kit ships with the placeholder
# https://pgque-docs.invalid (the project has no published docs address).
# FILE defaults to prometheus-alerts.yml and grafana-dashboard.json beside
# this script; run it on the copies you deploy (docs/monitoring.md).
#
# Run:   monitoring/docs-base.sh https://git.example.com/pgque_bgw/blob/v0.3.0/docs
set -euo pipefail
PLACEHOLDER='https://pgque-docs.invalid'
# no space or control character (a raw one breaks the JSON and the YAML),
# quote, | (the sed delimiter), & or \ (sed's replacement specials)
if [ $# -lt 1 ] || ! [[ "$1" =~ ^https?://[^][:space:][:cntrl:]\"\'\|\&\\[]+$ ]]; then
	echo "usage: $0 BASE [FILE...]   (BASE: an http(s) URL of the docs/ directory)" >&2
	exit 2
fi
base=${1%/}
shift
[ $# -gt 0 ] || set -- "$(dirname "$0")/prometheus-alerts.yml" "$(dirname "$0")/grafana-dashboard.json"
for f in "$@"; do
	if ! grep -q "$PLACEHOLDER/" "$f"; then
		echo "$f: no link with the placeholder base $PLACEHOLDER (already set?)" >&2
		exit 1
	fi
	sed -i "s|$PLACEHOLDER/|$base/|g" "$f"
	echo "$f: runbook links now under $base/"
done
