-- pgque_bgw @PGQUE_VERSION@: assembled from sql/NN_*.sql by the Makefile; edit the parts, not this file.

\echo Use "CREATE EXTENSION pgque_bgw" to load this file. \quit
