/*
 * fuzz_tls_cert.h: a self-signed certificate (CN fuzz, IP 127.0.0.1, valid
 * until 2126) and its key, for the TLS fuzz target and its seeds. A test
 * key: it protects nothing.
 */
#ifndef RAFTLOCK_FUZZ_TLS_CERT_H
#define RAFTLOCK_FUZZ_TLS_CERT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fuzz_tls_cert_pem[] =
	"-----BEGIN CERTIFICATE-----\n"
	"MIIBhTCCASygAwIBAgIUDmdVe4KJIbYkbWSztapsnUQY9qEwCgYIKoZIzj0EAwIw\n"
	"DzENMAsGA1UEAwwEZnV6ejAgFw0yNjExMjUxMjUwMjVaGA8yMTI2MTEwMTEyNTAy\n"
	"NVowDzENMAsGA1UEAwwEZnV6ejBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABAFk\n"
	"QTGrYB5/PRFfA3AeCsXono38cmezdpzN/Xb4deQKlHgN9xxwltdq62M2OmG3nhor\n"
	"D25NTdYrOUiLdTUPBLujZDBiMB0GA1UdDgQWBBTWODByRSPjQ7ZiY/pgfO8dLz1d\n"
	"zzAfBgNVHSMEGDAWgBTWODByRSPjQ7ZiY/pgfO8dLz1dzzAPBgNVHRMBAf8EBTAD\n"
	"AQH/MA8GA1UdEQQIMAaHBH8AAAEwCgYIKoZIzj0EAwIDRwAwRAIgCji7mnn+qZtS\n"
	"2WopZYz3UJqIGy0A2tWcLhJtE7lLeEACIGFqzyaYH8xwEY5SoyaZIWk6YgGficzt\n"
	"WSp3ZYzPZ+AJ\n"
	"-----END CERTIFICATE-----\n";

static const char fuzz_tls_key_pem[] =
	"-----BEGIN PRIVATE KEY-----\n"
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgG152axiPM6kWBglL\n"
	"qk1hTCi/dW85QZGrkQhJ1ukfWDmhRANCAAQBZEExq2Aefz0RXwNwHgrF6J6N/HJn\n"
	"s3aczf12+HXkCpR4DfcccJbXautjNjpht54aKw9uTU3WKzlIi3U1DwS7\n"
	"-----END PRIVATE KEY-----\n";

/* Writes them as DIR/cert.pem and DIR/key.pem in a new temporary
 * directory (dir: at least 64 bytes); returns 0 or -1. */
static inline int fuzz_tls_write_files(char *dir)
{
	static const char *names[2] = {"cert.pem", "key.pem"};
	const char *texts[2] = {fuzz_tls_cert_pem, fuzz_tls_key_pem};
	strcpy(dir, "/tmp/raftlock-fuzz-tls.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	for (int i = 0; i < 2; i++) {
		char path[128];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		FILE *f = fopen(path, "w");
		if (f == NULL || fputs(texts[i], f) < 0 || fclose(f) != 0)
			return -1;
	}
	return 0;
}

#endif
