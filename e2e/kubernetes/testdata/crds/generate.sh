#!/usr/bin/env bash
# generate.sh writes the two Prometheus Operator CRDs the monitoring
# component's test validates against (monitoring.coreos.com_servicemonitors.yaml,
# monitoring.coreos.com_prometheusrules.yaml) from the Operator's Go types at
# the version e2e/kubernetes/go.mod requires, the way the Operator's own
# "make generate-crds" writes example/prometheus-operator-crd/: controller-gen
# crd:crdVersions=v1 over pkg/apis/monitoring/v1 and v1alpha1, then the
# operator.prometheus.io/version annotation after controller-gen's.
#
# Why generated, not copied: the Operator's root module (which holds
# example/prometheus-operator-crd/) is not on the Go module proxy at the
# types' version; the types module is. This recipe reproduces the Operator's
# committed CRD files byte for byte (checked at v0.93.0).
#
#   ./generate.sh          write the two files beside this script
#   ./generate.sh check    fail if the files here differ from a fresh generation
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
module=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring
controller_gen=sigs.k8s.io/controller-tools/cmd/controller-gen@v0.21.0
version=$(cd "$here/../.." && go list -m -f '{{.Version}}' "$module")

work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
src=$(go mod download -json "$module@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
GOBIN="$work/bin" go install "$controller_gen"
(cd "$work/src" && go mod download &&
	"$work/bin/controller-gen" crd:crdVersions=v1 paths=./v1/. paths=./v1alpha1/. output:crd:dir="$work/out")
sed -i "/^    controller-gen.kubebuilder.io.version.*/a\\    operator.prometheus.io/version: ${version#v}" "$work"/out/*.yaml

status=0
for kind in servicemonitors prometheusrules; do
	f=monitoring.coreos.com_$kind.yaml
	if [[ ${1:-} == check ]]; then
		diff -u "$here/$f" "$work/out/$f" || status=1
	else
		cp "$work/out/$f" "$here/$f"
	fi
done
exit $status
