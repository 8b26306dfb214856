/* errors.c: raftlock_strerror(), from the table in raftlock.h. */
#include "raftlock.h"

RAFTLOCK_API const char *raftlock_strerror(int code)
{
	switch (code) {
	case RAFTLOCK_OK: return "success";
#define RAFTLOCK__ERROR_CASE(name, value, message) \
	case RAFTLOCK_##name: return message;
		RAFTLOCK_ERRORS(RAFTLOCK__ERROR_CASE)
#undef RAFTLOCK__ERROR_CASE
	}
	return "unknown error";
}
