/* abi.c: raftlock_struct_size(), from one table of the structs of
 * raftlock.h. A binding that declares them itself (the Python package's
 * _native.py) compares their sizes with its own when it loads the
 * library. */
#include <string.h>

#include "raftlock.h"

/* Every struct raftlock.h defines; a struct added there is added here
 * (test_client_struct_size checks the header against this table). */
#define ABI_STRUCTS(X)              \
	X(raftlock_client_options)  \
	X(raftlock_session_options) \
	X(raftlock_lock_options)    \
	X(raftlock_multi_item)      \
	X(raftlock_position)        \
	X(raftlock_watch_event)     \
	X(raftlock_leader_event)    \
	X(raftlock_member)          \
	X(raftlock_status)          \
	X(raftlock_owner)           \
	X(raftlock_holder)          \
	X(raftlock_waiter)          \
	X(raftlock_lock_info)       \
	X(raftlock_lock_list)       \
	X(raftlock_session_info)    \
	X(raftlock_session_list)    \
	X(raftlock_acl_rule)        \
	X(raftlock_acl_list)        \
	X(raftlock_member_info)     \
	X(raftlock_member_list)

RAFTLOCK_API size_t raftlock_struct_size(const char *name)
{
	if (name == NULL)
		return 0;
#define ABI_STRUCT_SIZE(s)         \
	if (strcmp(name, #s) == 0) \
		return sizeof(struct s);
	ABI_STRUCTS(ABI_STRUCT_SIZE)
#undef ABI_STRUCT_SIZE
	return 0;
}
