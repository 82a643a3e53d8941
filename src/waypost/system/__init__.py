"""Bounded access to the operating system: commands run under one deadline for their whole
process group, files read only when regular and within a size, HTTP under one overall
deadline. Below the use cases and delivery (both run commands and make requests), above the
pure core."""
