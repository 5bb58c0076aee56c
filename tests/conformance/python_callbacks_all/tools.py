"""The desk's tool."""


def lookup_order(order_id: str) -> dict:
    """Looks an order up.

    Args:
      order_id: the order's id.
    """
    return {"status": "shipped" if order_id == "AB-12" else "unknown", "order_id": order_id}
