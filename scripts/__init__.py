"""Jobs for one dataset or one purpose (the quickstart, WMT14), not part of the package."""
