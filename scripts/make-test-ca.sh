#!/usr/bin/env bash
# Makes a self-signed CA, a server certificate and a client certificate
# for running the mesh with TLS (--tls-cert/--tls-key/--tls-client-ca on
# the services, --peer-tls-ca/--peer-tls-cert/--peer-tls-key on the peers
# that dial them). For tests and trials: a real deployment uses its own CA.
#
#   scripts/make-test-ca.sh [DIR]        (default: data/tls)
#
# DIR gets ca.pem (and ca-key.pem, keep it private), server.pem and
# server-key.pem, client.pem and client-key.pem. The server certificate
# names localhost, 127.0.0.1 and the compose service names, and may also
# be used as a client certificate, so that a service's own health check
# (`<binary> healthcheck`) and its calls to its peers work with the same
# files under mutual TLS. Extra names: SANS="DNS:mesh.example,IP:10.0.0.5".
set -euo pipefail

dir="${1:-data/tls}"
days="${DAYS:-365}"
names="DNS:localhost,IP:127.0.0.1,IP:::1,DNS:storage,DNS:modelgateway,DNS:vmmanager,DNS:coordinator,DNS:runner,DNS:fakellm"
if [[ -n "${SANS:-}" ]]; then
	names="$names,$SANS"
fi

mkdir -p "$dir"
umask 077
cd "$dir"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$days" \
	-subj "/CN=rolloutmesh test CA" -keyout ca-key.pem -out ca.pem \
	-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

issue() { # name, common name, extended key usage, subjectAltName (or "")
	local name=$1 cn=$2 eku=$3 san=$4 ext
	ext=$(mktemp)
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$eku"
		[[ -n "$san" ]] && echo "subjectAltName=$san"
	} >"$ext"
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$cn" \
		-keyout "$name-key.pem" -out "$name.csr" 2>/dev/null
	openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
		-days "$days" -extfile "$ext" -out "$name.pem" 2>/dev/null
	rm -f "$name.csr" "$ext"
}

issue server "rolloutmesh" "serverAuth,clientAuth" "$names"
issue client "rolloutmesh client" "clientAuth" ""
rm -f ca.srl
# Readable by the services' user only; containers running as another user
# need the files mounted with that owner.
chmod 0600 ./*-key.pem
chmod 0644 ca.pem server.pem client.pem

openssl verify -CAfile ca.pem server.pem client.pem >/dev/null
echo "wrote $(pwd)/{ca,server,client}.pem and their keys"
