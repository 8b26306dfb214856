/* append_order.c: see append_order.h. */
#include "append_order.h"

void append_order_hold(struct append_order *o)
{
	o->holding = true;
}

bool append_order_keep(struct append_order *o, struct raft_io *io, struct raft_io_append *req,
		       const struct raft_entry entries[], unsigned n, raft_io_append_cb cb)
{
	if (!o->holding || o->n == APPEND_ORDER_MAX)
		return false;
	o->kept[o->n].io = io;
	o->kept[o->n].req = req;
	o->kept[o->n].entries = entries;
	o->kept[o->n].n = n;
	o->kept[o->n].cb = cb;
	o->n++;
	return true;
}

void append_order_release(struct append_order *o, append_order_issue_fn issue, void *arg)
{
	o->holding = false;
	unsigned n = o->n;
	o->n = 0;
	for (unsigned i = 0; i < n; i++)
		issue(arg, o->kept[i].io, o->kept[i].req, o->kept[i].entries, o->kept[i].n,
		      o->kept[i].cb);
}
