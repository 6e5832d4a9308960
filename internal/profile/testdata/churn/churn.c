/* churn: threads that allocate and free small blocks, half of them freed
   by another thread (a producer/consumer hand-off), the pattern that
   makes glibc malloc's arenas contend. usage: churn SECONDS THREADS
   (SECONDS 0: until killed) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RING 4096
static void *ring[64][RING];
static volatile int stop;
static int nthreads;

static void *work(void *arg) {
	long id = (long)arg;
	unsigned seed = (unsigned)id * 2654435761u;
	long n = 0;
	while (!stop) {
		for (int i = 0; i < RING; i++) {
			size_t sz = 16 + (rand_r(&seed) % 512);
			void *p = malloc(sz);
			memset(p, (int)i, 16);
			/* hand the block to the next thread's ring: it frees it */
			void **slot = &ring[(id + 1) % nthreads][i];
			void *old = __atomic_exchange_n(slot, p, __ATOMIC_ACQ_REL);
			free(old);
			n++;
		}
	}
	return (void *)n;
}

int main(int argc, char **argv) {
	int secs = argc > 1 ? atoi(argv[1]) : 5;
	nthreads = argc > 2 ? atoi(argv[2]) : 8;
	if (nthreads < 1 || nthreads > 64) nthreads = 8;
	pthread_t t[64];
	for (long i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, work, (void *)i);
	if (secs <= 0)
		for (;;) pause(); /* until killed: a test ends it */
	struct timespec ts = {secs, 0};
	nanosleep(&ts, NULL);
	stop = 1;
	long total = 0;
	for (int i = 0; i < nthreads; i++) { void *r; pthread_join(t[i], &r); total += (long)r; }
	printf("%ld allocations in %d s, %.1f M/s\n", total, secs, total / 1e6 / secs);
	return 0;
}
