"""Generation behind one interface (base.py): paged/ in-process, process.py in a child, clients/ over HTTP, fleet/ servers."""
