/* errmsg.c: see errmsg.h. */
#include "errmsg.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local const struct transport *errmsg_owner;
static _Thread_local char errmsg_text[ERRMSG_SIZE];
static _Thread_local const struct transport *errmsg_note_owner;
static _Thread_local int errmsg_note_code;
static _Thread_local char errmsg_note_text[ERRMSG_SIZE / 2];

void errmsg_note(const struct transport *client, int code, const char *detail)
{
	snprintf(errmsg_note_text, sizeof errmsg_note_text, "%s", detail);
	errmsg_note_owner = client;
	errmsg_note_code = code;
}

int errmsg_set(const struct transport *client, int code, const char *detail, const char *fmt, ...)
{
	char context[ERRMSG_SIZE / 2];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(context, sizeof context, fmt, ap);
	va_end(ap);
	if ((detail == NULL || detail[0] == '\0') && errmsg_note_code == code && code != 0 &&
	    errmsg_note_owner == client)
		detail = errmsg_note_text;
	if (detail != NULL && detail[0] != '\0') {
		int n = snprintf(errmsg_text, sizeof errmsg_text, "%s: %s (%s)", context,
				 raftlock_strerror(code), detail);
		(void)n; /* a long detail is cut short */
	} else
		snprintf(errmsg_text, sizeof errmsg_text, "%s: %s", context,
			 raftlock_strerror(code));
	errmsg_owner = client;
	return code;
}

const char *errmsg_get(const struct transport *client)
{
	if (errmsg_text[0] == '\0' || errmsg_owner != client)
		return "no error";
	return errmsg_text;
}
