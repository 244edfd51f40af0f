#!/bin/sh
# The SASL_SSL listener's TLS for docker-compose.yml (service kafka-tls-init), as the local stack's
# scripts/devstack/tls.py makes it: a CA made here, the broker's certificate (kafka, localhost,
# 127.0.0.1) signed by it in a PKCS12 key store, the CA's key deleted. Made once per volume, with
# the JDK's keytool of the Kafka image; the key store's password is random, kept in a 0600 file
# (the image's KAFKA_SSL_*_CREDENTIALS convention) and never on a command line.
set -eu
dir=/etc/kafka/secrets
[ -f "$dir/broker.p12" ] && exit 0
umask 077
cd "$dir"
rm -f ca.p12 ca.pem broker.csr broker.pem broker.p12.tmp keystore_creds
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > keystore_creds
keytool -genkeypair -alias ca -keyalg EC -groupname secp256r1 -validity 3650 \
  -dname "CN=airflow-kafka-offsets compose CA" -ext bc:c -ext ku:c=keyCertSign,cRLSign \
  -keystore ca.p12 -storetype PKCS12 -storepass:file keystore_creds
keytool -exportcert -rfc -alias ca -keystore ca.p12 -storepass:file keystore_creds -file ca.pem
keytool -genkeypair -alias broker -keyalg EC -groupname secp256r1 -validity 3650 -dname "CN=kafka" \
  -keystore broker.p12.tmp -storetype PKCS12 -storepass:file keystore_creds
keytool -certreq -alias broker -keystore broker.p12.tmp -storepass:file keystore_creds -file broker.csr
keytool -gencert -alias ca -keystore ca.p12 -storepass:file keystore_creds -validity 3650 -rfc \
  -ext san=dns:kafka,dns:localhost,ip:127.0.0.1 -ext ku:c=digitalSignature -ext eku=serverAuth \
  -infile broker.csr -outfile broker.pem
keytool -importcert -noprompt -alias ca -file ca.pem -keystore broker.p12.tmp -storepass:file keystore_creds
keytool -importcert -alias broker -file broker.pem -keystore broker.p12.tmp -storepass:file keystore_creds
rm -f ca.p12 broker.csr broker.pem
chmod 644 ca.pem
chown 1000:1000 keystore_creds broker.p12.tmp
mv broker.p12.tmp broker.p12  # last: its presence means the set is complete
