/* check_token: a resource that can ask the service whether the token a
 * writer presents still belongs to a current holder (Chubby's sequencer
 * check). Usage: check_token NAME TOKEN */
#include "example_common.h"

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: check_token NAME TOKEN\n");
		return 2;
	}
	raftlock_client *c = example_connect("example-check-token");
	bool current;
	int rv = raftlock_check_token(c, argv[1], strtoull(argv[2], NULL, 10), &current);
	if (rv != 0)
		example_die(c, "check token", rv);
	printf("token %s for %s is %s\n", argv[2], argv[1], current ? "current" : "NOT current");
	raftlock_client_close(c);
	return current ? 0 : 3;
}
