"""The container backend over the Docker or Podman CLI: images by content hash, compose sidecars."""
