/*
 * tls_stream.h: TLS on a libuv TCP stream, for raftlockd's client port, the
 * leader's STATUS connections to its followers and the peer (raft port)
 * proxy. The engine reads ciphertext from the stream, feeds it to OpenSSL
 * through a memory BIO and hands its owner the plaintext; the owner's
 * plaintext is encrypted into the engine's output buffer and written to the
 * stream. The owner
 * never sees a record: partial records, several records in one read and
 * records split over many reads are the engine's business.
 *
 * Life of an engine:
 *   1. The owner has an open uv_stream_t (a uv_tcp_t it accepted, or one
 *      whose uv_tcp_connect succeeded) and calls tls_stream_start(). The
 *      engine takes the stream over: it sets stream->data and reads from it.
 *      A client starts the handshake at once; a server waits for the
 *      ClientHello.
 *   2. When the handshake completes, opts->on_handshake (if given) runs
 *      once; plaintext then arrives through opts->on_read. The owner may
 *      write at any time after start: writes made during the handshake are
 *      queued and encrypted, in order, once it completes.
 *   3. The end of the connection is reported once through on_read with
 *      nread < 0 (see tls_stream_read_cb); the owner then calls
 *      tls_stream_close(). An owner may close at any time before that too.
 *   4. close_cb runs once the stream and the engine's timer are closed and
 *      every write callback has run: only then may the memory of the engine,
 *      the stream and the write requests be freed.
 *
 * A handshake not completed within the handshake timeout fails (UV_ETIMEDOUT):
 * a client that opens a connection and sends nothing, or a record a byte at
 * a time, holds it for at most that long.
 *
 * Errors are libuv's codes, negative: UV_EOF (the peer closed, with or
 * without close_notify), UV_ECONNRESET and the stream's other read errors,
 * UV_ETIMEDOUT (handshake deadline), UV_ECONNABORTED (the peer closed during
 * the handshake), UV_EPROTO (a TLS failure: bad handshake, a certificate
 * that does not verify, a corrupt record), UV_ENOMEM. tls_stream_error()
 * says which, in words, for the log.
 *
 * Loop thread only. Callbacks are never called from inside a tls_stream_*
 * call, only from the loop. The header is shared with the peer proxy:
 * changes are described here.
 *
 * Changes since the first version: the engine runs on any connected libuv
 * stream, not only TCP (fuzz_tls_stream uses a pipe on a socket pair); when
 * tls_stream_start() fails it leaves stream->data as it found it. A write
 * the kernel takes at once completes from the loop without a uv_write
 * request; once the handshake is done, tls_stream_write() borrows the bytes
 * only while it runs.
 */
#ifndef RAFTLOCK_TLS_STREAM_H
#define RAFTLOCK_TLS_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <openssl/ssl.h>
#include <uv.h>

#include "tls_ctx.h"

/* Default handshake deadline (tls-handshake-timeout-ms). */
#define TLS_STREAM_HANDSHAKE_TIMEOUT_MS 10000

struct tls_stream;
struct tls_stream_write;

/*
 * Plaintext from the peer: nread > 0 bytes at buf, borrowed until the
 * callback returns. nread < 0: the connection ended (error codes above);
 * called so once, after which on_read is not called again and the owner
 * should call tls_stream_close(). A handshake failure is reported this way
 * too (on_handshake is not called). The callback may call any tls_stream_*
 * function on ts, including tls_stream_close() and tls_stream_read_stop().
 */
typedef void (*tls_stream_read_cb)(struct tls_stream *ts, ssize_t nread, const char *buf);

/* The handshake completed: the peer's certificate, if any, verified against
 * the context's CA (and, for a client, matched the expected host). */
typedef void (*tls_stream_handshake_cb)(struct tls_stream *ts);

/* A write is done: status 0 when its ciphertext was handed to the kernel,
 * else an error (UV_ECANCELED when the engine was closed first). Called
 * exactly once for every write that tls_stream_write() accepted. */
typedef void (*tls_stream_write_cb)(struct tls_stream_write *req, int status);

typedef void (*tls_stream_close_cb)(struct tls_stream *ts);

struct tls_stream_options {
	enum tls_role role;
	/* Client role: the name or IP address the server's certificate must
	 * carry (copied); NULL checks the CA only. Ignored for a server. */
	const char *host;
	unsigned handshake_timeout_ms;        /* 0: TLS_STREAM_HANDSHAKE_TIMEOUT_MS */
	tls_stream_handshake_cb on_handshake; /* optional */
	tls_stream_read_cb on_read;           /* required */
};

/* A plaintext write. The owner allocates it (it may be embedded) and keeps
 * it, and the memory its buffers point to, until its callback runs. */
struct tls_stream_write {
	void *data; /* the owner's */
	/* private */
	struct tls_stream *ts;
	tls_stream_write_cb cb;
	uv_buf_t *bufs;
	unsigned nbufs;
	uv_buf_t small[4];
	size_t bytes;
	int status; /* on the engine's list of requests to call back */
	struct tls_stream_write *next;
};

/* The engine. The owner allocates it (it may be embedded) and may use
 * `data`; every other field is private. */
struct tls_stream {
	void *data; /* the owner's */
	/* private */
	uv_stream_t *stream;
	uv_timer_t timer; /* handshake deadline, then deferred work */
	SSL *ssl;
	BIO *net_in;  /* ciphertext read from the stream, for OpenSSL */
	BIO *net_out; /* writes OpenSSL's ciphertext to out */
	char *out;    /* ciphertext not yet handed to the stream */
	size_t out_len, out_cap;
	tls_stream_read_cb on_read;
	tls_stream_handshake_cb on_handshake;
	tls_stream_close_cb on_close;
	unsigned timeout_ms;
	bool established; /* handshake done */
	bool paused;      /* tls_stream_read_stop() */
	bool ended;       /* on_read told of the end (or will, see error) */
	bool reported;    /* ... and has been */
	bool closing;
	bool peer_eof;
	int error;                                          /* the end to report, 0 while open */
	int handles;                                        /* stream and timer not yet closed */
	struct tls_stream_write *queue, **queue_tail;       /* not encrypted yet */
	struct tls_stream_write *finished, **finished_tail; /* to call back */
	size_t queued_bytes;
	char errmsg[256];
	char peer_cn[256];
};

/*
 * Starts TLS on stream with ctx (its settings decide verification; the
 * engine takes its own reference, so ctx may be freed after). On success
 * the engine owns stream->data and the stream's reading until close_cb, and
 * 0 is returned; otherwise UV_ENOMEM or UV_EINVAL (no on_read, or a host
 * OpenSSL refuses), nothing is started and the owner still owns and closes
 * the stream.
 */
int tls_stream_start(struct tls_stream *ts, uv_stream_t *stream, SSL_CTX *ctx,
		     const struct tls_stream_options *opts);

/*
 * Writes the plaintext of bufs[0..nbufs) (the array is copied, the bytes
 * are borrowed until cb; once tls_stream_established(), they are encrypted
 * before this returns and borrowed only during the call). Each buffer is
 * one SSL_write (records of up to 16 KiB): batch small replies into one
 * buffer. Returns:
 *   0                   accepted: cb will be called exactly once, from the
 *                       loop;
 *   TLS_STREAM_WRITTEN  the records went to the kernel before this
 *                       returned: req is done and cb is never called (like
 *                       uv_try_write, no loop turn just to say so; a
 *                       failure found later ends the connection, reported
 *                       through on_read);
 *   UV_EPIPE            the connection ended or is closing, or UV_ENOMEM:
 *                       cb is never called.
 */
#define TLS_STREAM_WRITTEN 1
int tls_stream_write(struct tls_stream_write *req, struct tls_stream *ts, const uv_buf_t bufs[],
		     unsigned nbufs, tls_stream_write_cb cb);

/* Bytes accepted for writing and not yet handed to the kernel: plaintext
 * queued behind the handshake plus ciphertext in the stream's queue. */
size_t tls_stream_write_queue_size(const struct tls_stream *ts);

/* Back-pressure: stop delivering plaintext (and reading the stream, once
 * the handshake is done) until tls_stream_read_start(). Plaintext already
 * decrypted or buffered is delivered after the start, from the loop. */
void tls_stream_read_stop(struct tls_stream *ts);
void tls_stream_read_start(struct tls_stream *ts);

/*
 * Closes the connection: sends close_notify if the handshake completed (one
 * attempt, never waited for), closes the stream and the timer. Write
 * requests not yet done get their callbacks with an error, then close_cb
 * (may be NULL) runs. Calling it again is a no-op.
 */
void tls_stream_close(struct tls_stream *ts, tls_stream_close_cb close_cb);

/* True once the handshake completed. */
bool tls_stream_established(const struct tls_stream *ts);

/* Why the connection ended, in words ("TLS handshake failed: certificate
 * verify failed: unable to get local issuer certificate", "TLS handshake not
 * done within 10000 ms"); "" while it has not. Valid until close_cb. */
const char *tls_stream_error(const struct tls_stream *ts);

/* The subject common name of the peer's verified certificate, "" when it
 * presented none (or before the handshake). Valid until close_cb. */
const char *tls_stream_peer_cn(const struct tls_stream *ts);

#endif
