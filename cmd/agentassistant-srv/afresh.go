package main

import "errors"

// errStartAfresh: run stopped the server because the cluster's storage
// was lost (srv/cluster's storageLost); main starts it again, in this
// process's place, so it makes the buckets again and follows them from
// their start.
var errStartAfresh = errors.New("the cluster's storage was lost: start afresh")
