"""Ray and nothing of RL: join or start a cluster, placement groups, a pool of live actors; ClusterConfig."""
