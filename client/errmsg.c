/* errmsg.c: see errmsg.h. */
#include "errmsg.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local const struct transport *errmsg_owner;
static _Thread_local char errmsg_text[ERRMSG_SIZE];
static _Thread_local int errmsg_noted_code;
static _Thread_local char errmsg_noted[ERRMSG_SIZE / 2];

void errmsg_note(int code, const char *detail)
{
	errmsg_noted_code = code;
	snprintf(errmsg_noted, sizeof errmsg_noted, "%s", detail != NULL ? detail : "");
}

void errmsg_drop_note(void)
{
	errmsg_noted_code = 0;
}

void errmsg_take_note(int *code, char *detail, size_t len)
{
	*code = errmsg_noted_code;
	snprintf(detail, len, "%s", errmsg_noted_code != 0 ? errmsg_noted : "");
	errmsg_noted_code = 0;
}

int errmsg_set(const struct transport *client, int code, const char *detail, const char *fmt, ...)
{
	char context[ERRMSG_SIZE / 2];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(context, sizeof context, fmt, ap);
	va_end(ap);
	if ((detail == NULL || detail[0] == '\0') && code != 0 && code == errmsg_noted_code)
		detail = errmsg_noted;
	errmsg_noted_code = 0;
	int n; /* truncated to fit */
	if (detail != NULL && detail[0] != '\0')
		n = snprintf(errmsg_text, sizeof errmsg_text, "%s: %s (%s)", context,
			     raftlock_strerror(code), detail);
	else
		n = snprintf(errmsg_text, sizeof errmsg_text, "%s: %s", context,
			     raftlock_strerror(code));
	if (n >= (int)sizeof errmsg_text) /* cut: say so */
		memcpy(errmsg_text + sizeof errmsg_text - 4, "...", 4);
	errmsg_owner = client;
	return code;
}

const char *errmsg_get(const struct transport *client)
{
	if (errmsg_text[0] == '\0' || errmsg_owner != client)
		return "no error";
	return errmsg_text;
}
