"""SLARouter core library."""
