/* removal.c: see removal.h. */
#include "removal.h"

#include <stdio.h>
#include <string.h>

#include "datadir.h"

#define REMOVAL_FILE "REMOVED"

bool removal_should_leave(const struct removal_view *v)
{
	if (!v->retired)
		return false;
	if (v->committed_known && !v->in_committed)
		return true; /* raft committed it too */
	if (v->leader || !v->follower)
		return true; /* a retired id does not lead; a candidate hears no leader */
	return v->silent_ms >= v->election_ms;
}

void removal_message(char *out, size_t len, uint64_t id)
{
	snprintf(out, len, "this node was removed from the cluster (member %llu); stopping",
		 (unsigned long long)id);
}

int removal_mark(const char *data_dir, uint64_t id)
{
	char path[DATADIR_PATH_MAX], text[64];
	datadir_path(path, sizeof path, data_dir, REMOVAL_FILE);
	snprintf(text, sizeof text, "node=%llu\n", (unsigned long long)id);
	return datadir_write_file(path, text, strlen(text));
}

bool removal_marked(const char *data_dir, char *out, size_t len)
{
	char path[DATADIR_PATH_MAX], text[64] = "";
	datadir_path(path, sizeof path, data_dir, REMOVAL_FILE);
	if (datadir_read_file(path, text, sizeof text) != 0)
		return false;
	unsigned long long id = 0;
	if (sscanf(text, "node=%llu", &id) != 1)
		id = 0; /* damaged: refused all the same, the file says enough */
	char line[128];
	removal_message(line, sizeof line, id);
	snprintf(out, len,
		 "%s (%s says so: the cluster will not take this data directory back; a machine "
		 "comes back as a new member, under a new id, with an empty data directory: "
		 "docs/OPERATIONS.md, \"Removing a member\")",
		 line, path);
	return true;
}
